"""One kernel (a PrimFunc): tune it with MetaSchedule into the on-disk database, and time it with the protocol.

The settings come in a :class:`~syno_automl.measure.request.MeasureRequest`. ``trials == 0`` gives TVM's default
schedule (DLight defaults on CUDA) and no database. With ``trials > 0`` the database under ``work_dir`` is read
first: a workload with ``>= trials`` records for the target is not re-tuned (``Latency.reused``), otherwise only
the missing trials are run. ``seconds`` is a tuning budget (soft, checked after each measured batch; hard with
``isolate=True``, which runs the whole call in a child process).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from syno_automl.measure.database import DEFAULT_WORK_DIR, open_database, records_for
from syno_automl.measure.isolate import run_child
from syno_automl.measure.request import MeasureRequest, job_payload
from syno_automl.measure.result import Latency, failed_at, slug, speedup
from syno_automl.measure.target import TargetSpec, parse_target, resolve_target

__all__ = ["to_irmodule", "tune_kernel", "apply_record", "tune_and_time", "compare", "run_job"]


def to_irmodule(obj):
    """A program dict / PrimFunc / IRModule / ``(inputs, out)`` TE pair as an IRModule with a ``main``."""
    import tvm
    from tvm import te

    from syno_automl.codegen.tvm import program_to_irmodule

    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], te.Tensor):
        ins, out = obj
        func = te.create_prim_func([*ins, out]).with_attr("global_symbol", "main")
        return tvm.IRModule({"main": func})
    return program_to_irmodule(obj)


def apply_record(mod, record):
    """The best record's schedule, prepared like the builder prepares candidates.

    (``Database.query_schedule`` takes the top record of the workload whatever its target, so the record is picked
    by the caller, among those of the right target.) ``RemoveWeightLayoutRewriteBlock`` drops weight layout
    rewrites from the timed kernel, as during tuning: weights are constants laid out ahead of time, for the
    operator and the baseline alike."""
    from tvm.s_tir.schedule import Schedule
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    sch = Schedule(mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)


def _tir_contexts(mod, tgt, work_dir: str, trials: int, seed: int) -> list:
    """One ``TuneContext`` per PrimFunc of ``mod``, as ``ms.tune_tir`` makes them."""
    from tvm import tirx
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    from syno_automl.measure.metaschedule import ms_logging, search_strategy

    named = sorted(((gv.name_hint, f) for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc)),
                   key=lambda x: x[0])
    names = [n for n, _ in named]
    strategy = search_strategy(trials)
    with ms_logging():  # get_loggers_from_work_dir runs dictConfig
        loggers = get_loggers_from_work_dir(work_dir, names)
    return [
        ms.TuneContext(mod=func, target=tgt, space_generator="post-order-apply", search_strategy=strategy,
                       task_name=name, rand_state=rand_state, num_threads=os.cpu_count() or 1, logger=logger).clone()
        for (name, func), logger, rand_state in zip(named, loggers, fork_seed(seed, n=len(named)))
    ]


def tune_kernel(mod, tgt, work_dir: str, spec: TargetSpec, request: MeasureRequest, progress=None, label: str = ""):
    """Tune ``mod`` into the JSON database under ``work_dir`` (``request.trials``, ``seconds``, ``seed``), measured
    on ``spec`` by the request's runner (started only when a trial is missing); a :class:`TuningInfo` whose ``best``
    is the best schedule's module (None without a valid record)."""
    from syno_automl.measure.metaschedule import ensure_tensor_intrin, labelled, open_runner, run_tuning

    trials = request.trials
    ensure_tensor_intrin(tgt.kind.name)
    db = open_database(work_dir)
    have = len(records_for(db, mod, tgt))
    t0 = time.time()
    if have < trials:
        contexts = _tir_contexts(mod, tgt, work_dir, trials, request.seed)
        with open_runner(spec, request.runner, request.rpc_session_timeout) as (runner, in_memory):
            info = run_tuning(contexts, [1.0] * len(contexts), [trials - have] * len(contexts), db, work_dir, runner,
                              request, in_memory=in_memory, progress=labelled(progress, label))
        info.tuned_tasks = 1
        db = open_database(work_dir)  # re-read from disk
    else:
        from syno_automl.measure.metaschedule import TuningInfo

        info = TuningInfo(reused=True)
    recs = records_for(db, mod, tgt)
    info.new_trials = max(0, len(recs) - have)
    info.records = len(recs)
    info.tuning_s = time.time() - t0
    info.best = apply_record(mod, recs[0]) if recs else None
    return info


def tune_and_time(
    program_or_primfunc,
    target: Any = None,
    request: MeasureRequest = MeasureRequest(),
    *,
    progress=None,
    label: str = "",
) -> Latency:
    """Tune (``request.trials > 0``) and time a program dict / PrimFunc / IRModule / ``(inputs, out)`` TE pair on
    ``target`` (default: the request's only target).

    From the :class:`MeasureRequest`: ``trials=0``: TVM's default schedule (DLight defaults on CUDA), no database.
    ``seconds``: tuning time budget (soft, checked after each batch; hard when ``isolate=True``).
    ``build_target``: what to compile for when ``target`` is ``rpc:...`` (default: the host llvm target).
    ``isolate``: run in a child process, killed after ``seconds + isolate_grace_s`` (120 s by default; no limit
    without ``seconds``). ``runner``: how candidates are measured on a local target, ``"local"`` (default: a worker
    process) or ``"inprocess"`` (faster, not crash-proof; see :func:`~syno_automl.measure.metaschedule.make_runner`).
    ``progress``: called with one line per measured batch (``label`` first). Never raises: a failure gives
    ``median_ms=None`` with the reason in ``note``."""
    if target is None:
        target = request.target
    name = target if isinstance(target, str) else str(target)
    try:
        spec = parse_target(target)
        name = spec.name
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return Latency.failed(str(target), f"target: {exc}")
    if request.isolate:
        return _run_isolated(program_or_primfunc, target, request)
    trials, seconds = request.trials, request.seconds
    stage = "lower"
    tuned_trials, tuning_s, reused, notes = 0, None, False, []
    try:
        import tvm

        from syno_automl.codegen.tvm import default_gpu_schedule, device_for
        from syno_automl.measure.timing import random_args, time_main, time_remote

        mod = to_irmodule(program_or_primfunc)
        stage = "target"
        tgt, why = resolve_target(spec, target, request.build_target)
        if why is not None:  # (exactly when tgt is None)
            return Latency.failed(name, why)
        sched_mod = mod
        if trials > 0:
            stage = "tune"
            from syno_automl.measure.metaschedule import tuning_failure_note

            wd = request.work_dir or DEFAULT_WORK_DIR
            if spec.kind == "rpc":  # records measured on a board stay apart from the host's (same Target)
                assert spec.key is not None  # parse_target gives an rpc spec its key
                wd = os.path.join(wd, "rpc-" + slug(spec.key))
            info = tune_kernel(mod, tgt, wd, spec, request, progress, label)
            tuned_trials, tuning_s, reused = info.records, info.tuning_s, info.reused
            if info.best is None:
                return Latency.failed(name, tuning_failure_note(info, trials), 0, tuning_s)
            sched_mod = info.best
            notes.append(f"reused {tuned_trials} records from {wd}" if reused
                         else f"tuned {info.new_trials} new trials in {tuning_s:.1f} s ({tuned_trials} records)")
            if info.deadline_hit:
                notes.append(f"stopped at the {seconds} s budget")
        else:
            notes.append("untuned default schedule")
        stage = "build"
        if trials <= 0 and tgt.kind.name == "cuda":
            sched_mod = default_gpu_schedule(sched_mod, tgt)
        exe = tvm.compile(sched_mod, target=tgt)
        func = mod["main"]
        stage = "time"
        if spec.kind == "rpc":
            samples = time_remote(exe, func, tgt, spec, request.protocol, request.rpc_session_timeout)
        else:
            dev = device_for(tgt)
            samples = time_main(exe.mod, dev, random_args(func, dev, request.seed), request.protocol)
        return Latency.of_samples(samples, name, tuned_trials, "; ".join(notes), reused, tuning_s)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return failed_at(name, stage, exc, tuned_trials, tuning_s, "tune_and_time")


def compare(operator, baseline, target: Any = None, request: MeasureRequest = MeasureRequest(), *, progress=None,
            label: str = "") -> dict[str, Any]:
    """Tune and time an operator and its baseline with the same request (budget and protocol).
    Returns ``{"operator": Latency, "baseline": Latency, "speedup": baseline/operator or None}``."""
    op = tune_and_time(operator, target, request, progress=progress, label=label)
    base = tune_and_time(baseline, target, request, progress=progress, label=label)
    return {"operator": op, "baseline": base, "speedup": speedup(base, op)}


def _run_isolated(obj, target, request: MeasureRequest) -> Latency:
    name = target if isinstance(target, str) else str(target)
    try:
        import tvm

        mod = to_irmodule(obj)
        job = {"mod": tvm.ir.save_json(mod), "target": job_payload(target), "request": request.to_job()}
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return Latency.failed(name, f"lower: {type(exc).__name__}: {exc}")
    with tempfile.TemporaryDirectory(prefix="syno_lat_") as tmp:
        job_path, out_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        return run_child("kernel", job_path, out_path, name, request.seconds, request.grace_s(120.0))


def run_job(job_path: str) -> Latency:
    """The child side of ``isolate=True`` (see :mod:`syno_automl.measure.isolate`)."""
    import tvm

    with open(job_path) as f:
        job = json.load(f)
    return tune_and_time(tvm.ir.load_json(job["mod"]), job["target"], MeasureRequest.from_job(job["request"]))
