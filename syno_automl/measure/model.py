"""A whole model through Relax (the paper's Fig. 5): export, tune every fused kernel, build, verify, time.

Pipeline (one code path for every model, so the baseline and the substituted model are treated alike): the
export and preparation of :mod:`syno_automl.measure.relax`; tuning (``trials > 0``) with ``trials`` MetaSchedule
trials **per task** (every fused kernel, the budget semantics of the layer-level measure) through THE tuning loop
(:func:`syno_automl.measure.metaschedule.run_tuning`), records in a JSON database under
``work_dir/relax-<device>``; kernels with non-float inputs are never tuned (default schedules). A task that already
holds ``>= trials`` records, or was already given a budget of ``>= trials``, is not tuned again, so re-runs are
free and kernels shared by two models are tuned once. ``seconds`` stops the whole model's tuning at the first
measured batch past the deadline. Build: ``compile_relax`` (tuned) or ``tvm.compile`` (untuned; DLight on GPUs),
then the Relax VM; check (``verify=True``) against the torch model (relative tolerance ``rtol`` of the output's
max magnitude); timing: :data:`~syno_automl.measure.result.PROTOCOL` with
:func:`~syno_automl.measure.timing.time_main`, the function that times single kernels.

Nothing here raises on a failure: the :class:`Latency` comes back with ``median_ms=None`` and the stage and reason
in ``note``. ``isolate=True`` runs the whole measurement in a child process (the exported program travels as a
``.pt2`` file), killed after ``seconds`` plus a grace period. These settings (``trials``, ``seconds``, ``work_dir``,
``isolate``...) come in a :class:`~syno_automl.measure.request.MeasureRequest`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

import numpy as np

from syno_automl.measure.database import (
    DEFAULT_WORK_DIR,
    budget_key,
    load_budgets,
    open_database,
    records_for,
    save_budgets,
)
from syno_automl.measure.isolate import run_child
from syno_automl.measure.relax import (
    as_tuple,
    build_untuned,
    export_program,
    export_relax,
    first_output,
    float_inputs_only,
    prepare_relax,
)
from syno_automl.measure.request import MeasureRequest, job_payload
from syno_automl.measure.result import Latency, error_note, failed_at, slug, speedup
from syno_automl.measure.target import TargetSpec, device_name, parse_target, resolve_target

__all__ = ["tune_model", "model_latency", "compare_models", "run_job"]


def tune_model(mod, tgt, work_dir: str, spec: TargetSpec, request: MeasureRequest, progress=None, label: str = ""):
    """Tune every task of ``mod`` lacking ``request.trials`` records into the database under ``work_dir``, measured
    on ``spec`` by the request's runner (started only when a task is to be tuned: LocalRunner's start alone is a
    worker process importing TVM); a :class:`TuningInfo` whose ``best`` is the database."""
    from tvm.s_tir import meta_schedule as ms

    from syno_automl.measure.metaschedule import (
        TuningInfo,
        ensure_tensor_intrin,
        labelled,
        ms_logging,
        open_runner,
        run_tuning,
        search_strategy,
    )

    trials = request.trials
    ensure_tensor_intrin(tgt.kind.name)
    db = open_database(work_dir)
    tasks = ms.relax_integration.extract_tasks(mod, tgt)
    # kernels with an integer input (gather indices...) are left to the default schedules: MetaSchedule
    # measures candidates on random inputs, and random indices read out of bounds
    skipped = [t for t in tasks if not float_inputs_only(t.dispatched[0])]
    tasks = [t for t in tasks if float_inputs_only(t.dispatched[0])]
    have = [len(records_for(db, t.dispatched[0], tgt)) for t in tasks]
    # a task whose design space holds fewer distinct schedules than the budget never reaches `trials` records:
    # the budgets already spent are remembered next to the database, so such a task is not re-tuned either
    spent = load_budgets(work_dir)
    keys = [budget_key(t.dispatched[0], tgt) for t in tasks]
    todo = [(t, trials - h) for t, h, k in zip(tasks, have, keys) if h < trials and spent.get(k, 0) < trials]
    info = TuningInfo(reused=not todo)
    t0 = time.time()
    if todo:
        with ms_logging():  # it runs MetaSchedule's logging dictConfig
            contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                extracted_tasks=[t for t, _ in todo], work_dir=work_dir, space="post-order-apply",
                strategy=search_strategy(trials), seed=request.seed)
        with open_runner(spec, request.runner, request.rpc_session_timeout) as (runner, in_memory):
            info = run_tuning(contexts, weights, [m for _, m in todo], db, work_dir, runner, request,
                              in_memory=in_memory, progress=labelled(progress, label))
        if not info.deadline_hit:  # the whole budget was spent on every task
            save_budgets(work_dir, {budget_key(t.dispatched[0], tgt): trials for t, _ in todo})
        db = open_database(work_dir)  # re-read from disk
    counts = [len(records_for(db, t.dispatched[0], tgt)) for t in tasks]
    info.tasks, info.tuned_tasks, info.skipped = len(tasks), len(todo), [t.task_name for t in skipped]
    info.records = sum(counts)
    info.untuned_tasks = sum(1 for c in counts if c == 0)
    info.new_trials = max(0, sum(counts) - sum(have))
    info.tuning_s = time.time() - t0
    info.best = db
    return info


def model_latency(
    model,
    example_inputs,
    target: Any = None,
    request: MeasureRequest = MeasureRequest(),
    *,
    verify: bool = True,
    rtol: float = 1e-4,
    progress=None,
    label: str = "",
) -> Latency:
    """Export ``model`` (a torch module, or an ``ExportedProgram``), tune its kernels (``request.trials`` per task)
    and time it with the Relax VM on ``target`` (default: the request's only target); ``isolate_grace_s`` is 300 s
    by default. ``verify``: check the output against torch (relative tolerance ``rtol`` of its max magnitude).
    ``progress``: one line per measured batch. Never raises: a failure gives ``median_ms=None`` with the reason."""
    if target is None:
        target = request.target
    name = target if isinstance(target, str) else str(target)
    try:
        spec = parse_target(target)
        name = spec.name
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return Latency.failed(str(target), f"target: {exc}")
    tgt = None
    if not request.isolate:  # (the child resolves its own; the caller need not import TVM)
        # before the export (seconds of torch.export and Relax import): a target unusable now costs none of it
        tgt, failure = _resolved(spec, target, request)
        if failure is not None:
            return failure
    stage = "export"
    try:
        import torch

        inputs = as_tuple(example_inputs)
        ep = model if isinstance(model, torch.export.ExportedProgram) else export_program(model, inputs)
        reference = None
        if verify:
            with torch.no_grad():
                out = ep.module()(*inputs)
            while isinstance(out, (tuple, list)):
                out = out[0]
            reference = out.detach().cpu().numpy()
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return Latency.failed(name, error_note(stage, exc))
    if request.isolate:
        return _run_isolated(ep, inputs, reference, target, request, rtol)
    return _measure(ep, inputs, reference, spec, tgt, request, rtol, progress, label)


def _resolved(spec: TargetSpec, target: Any, request: MeasureRequest) -> tuple[Any, Latency | None]:
    """(`spec`'s TVM target, None), or (None, the failure to return instead): never raises, the reason is the
    note."""
    try:
        tgt, why = resolve_target(spec, target, request.build_target)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return None, failed_at(spec.name, "target", exc, what="model_latency")
    return tgt, (Latency.failed(spec.name, why) if why is not None else None)   # (why: exactly when tgt is None)


def _measure(ep, inputs, reference, spec: TargetSpec, tgt: Any, request: MeasureRequest, rtol: float, progress=None,
             label: str = "") -> Latency:
    """Import, tune, build, verify and time on ``tgt`` (:func:`_resolved`'s target of ``spec``)."""
    name = spec.name
    trials, seconds = request.trials, request.seconds
    stage = "import"
    tuned_trials, tuning_s, reused, notes = 0, None, False, []
    try:
        import tvm
        from tvm import relax

        from syno_automl.codegen.tvm import device_for
        from syno_automl.measure.timing import time_main, upload_remote

        mod = export_relax(ep)
        stage = "prepare"
        mod = prepare_relax(mod, tgt)
        if trials > 0:
            stage = "tune"
            from tvm.s_tir import meta_schedule as ms

            from syno_automl.measure.metaschedule import ms_logging, tuning_failure_note

            wd = os.path.join(request.work_dir or DEFAULT_WORK_DIR, "relax-" + slug(device_name(spec.name)))
            info = tune_model(mod, tgt, wd, spec, request, progress, label)
            tuned_trials, tuning_s, reused = info.records, info.tuning_s, info.reused
            if info.records == 0 and info.tasks > 0:
                return Latency.failed(name, tuning_failure_note(info, trials, "trials per task"), 0, tuning_s)
            notes.append(
                f"{info.tasks} tasks, reused {tuned_trials} records from {wd}" if reused
                else f"{info.tasks} tasks ({info.tuned_tasks} tuned): {info.new_trials} new trials in "
                f"{tuning_s:.1f} s ({tuned_trials} records)")
            if info.skipped:
                notes.append(f"{len(info.skipped)} tasks with integer inputs left untuned")
            if info.untuned_tasks:
                notes.append(f"{info.untuned_tasks} tasks without a valid record use default schedules")
            if info.deadline_hit:
                notes.append(f"stopped at the {seconds} s budget")
            stage = "build"
            with ms_logging():
                exe = ms.relax_integration.compile_relax(info.best, mod, tgt, params=None)
        else:
            notes.append("untuned default schedules")
            stage = "build"
            exe = build_untuned(mod, tgt)
        stage = "run"
        if spec.kind == "rpc":
            rmod, dev, closer = upload_remote(exe, tgt, spec, request.rpc_session_timeout, "model.so")
            vm = relax.VirtualMachine(rmod, dev)
        else:
            dev = device_for(tgt)
            vm, closer = relax.VirtualMachine(exe, dev), None
        args = [tvm.runtime.tensor(t.detach().cpu().numpy(), dev) for t in inputs]
        if reference is not None:
            stage = "verify"
            got = first_output(vm["main"](*args))
            scale = max(1.0, float(np.abs(reference).max()))
            err = float(np.abs(got - reference).max()) if got.shape == reference.shape else float("inf")
            if not err <= rtol * scale:
                return Latency.failed(name, f"verify: output differs from torch (max abs err {err:.3g}, "
                                      f"scale {scale:.3g}, shapes {got.shape} vs {reference.shape})",
                                      tuned_trials, tuning_s)
        stage = "time"
        samples = time_main(vm, dev, args, request.protocol)  # the protocol of every latency of this project
        del closer
        return Latency.of_samples(samples, name, tuned_trials, "; ".join(notes), reused, tuning_s)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return failed_at(name, stage, exc, tuned_trials, tuning_s, "model_latency")


def _run_isolated(ep, inputs, reference, target, request: MeasureRequest, rtol: float) -> Latency:
    import torch

    name = target if isinstance(target, str) else str(target)
    with tempfile.TemporaryDirectory(prefix="syno_e2e_") as tmp:
        try:
            torch.export.save(ep, os.path.join(tmp, "model.pt2"))
            torch.save({"inputs": [t.detach().cpu() for t in inputs], "reference": reference},
                       os.path.join(tmp, "inputs.pt"))
            job = {"target": job_payload(target), "request": request.to_job(), "rtol": rtol}
            with open(os.path.join(tmp, "job.json"), "w") as f:
                json.dump(job, f)
        except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
            return Latency.failed(name, error_note("export", exc))
        return run_child("model", tmp, os.path.join(tmp, "result.json"), name, request.seconds,
                         request.grace_s(300.0))


def run_job(tmp: str) -> Latency:
    """The child side of ``isolate=True`` (see :mod:`syno_automl.measure.isolate`): ``tmp`` holds the job."""
    import torch

    with open(os.path.join(tmp, "job.json")) as f:
        job = json.load(f)
    ep = torch.export.load(os.path.join(tmp, "model.pt2"))
    data = torch.load(os.path.join(tmp, "inputs.pt"), weights_only=False)
    spec, request = parse_target(job["target"]), MeasureRequest.from_job(job["request"])
    tgt, failure = _resolved(spec, job["target"], request)
    if failure is not None:
        return failure
    return _measure(ep, tuple(data["inputs"]), data["reference"], spec, tgt, request, job["rtol"])


def compare_models(baseline, model, example_inputs, target: Any = None, request: MeasureRequest = MeasureRequest(),
                   **kwargs) -> dict[str, Any]:
    """Tune and time ``baseline`` and ``model`` with the same request (budget and protocol); ``kwargs``
    (``verify``, ``rtol``, ``progress``, ``label``) go to :func:`model_latency`.

    Returns ``{"baseline": Latency, "model": Latency, "speedup": baseline/model or None}``; ``request.seconds`` is
    the tuning time budget of each model."""
    base = model_latency(baseline, example_inputs, target, request, **kwargs)
    new = model_latency(model, example_inputs, target, request, **kwargs)
    return {"baseline": base, "model": new, "speedup": speedup(base, new)}
