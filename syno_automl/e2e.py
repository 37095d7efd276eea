"""End-to-end model latency through Relax (the paper's Fig. 5): a model and its substituted twin, tuned and
timed the same way.

Pipeline (one code path for every model, so the baseline and the substituted model are treated alike):

1. ``torch.export.export(model.eval(), example_inputs)`` (batch 1 in the paper's setting);
2. torch's core-ATen decompositions, except ``aten.roll`` and ``aten.unfold``, then
   ``tvm.relax.frontend.torch.from_exported_program`` with the weights embedded as constants. Two converters
   of our own (:data:`CUSTOM_CONVERTERS`), each one TE compute of pure index arithmetic: ``aten.unfold``
   (``Tensor.unfold``, emitted by UNFOLD steps of the generated operator modules) has no converter in TVM 0.27;
   ``aten.roll`` (SHIFT) would otherwise become ``index_select`` on a constant index tensor, i.e. a ``take``
   kernel with an integer input, which MetaSchedule measures on random indices (out of bounds: a crash or
   garbage). As a safety net, kernels with non-float inputs are never tuned (default schedules);
3. preparation (``stack-notes §2``): ``DecomposeOpsForInference`` (BatchNorm in inference form),
   ``CanonicalizeBindings``, then the ``zero`` pipeline (``LegalizeOps`` -> TIR, ``FoldConstant`` (weight-only
   computations are done once, at compile time), ``FuseOps``/``FuseTIR``): MetaSchedule's task extraction only
   sees ``call_tir`` PrimFuncs, so without it there is "No tasks to tune";
4. tuning (``trials > 0``): ``trials`` MetaSchedule trials **per task** (every fused kernel of the model, same
   budget per kernel for both models, the budget semantics of the layer-level measure), through the tuning loop
   of the layer-level measure (:func:`syno_automl.latency.run_tuning`: the in-process builder, the runner of
   :func:`syno_automl.latency.make_runner` (``runner="local"``, the default, or
   ``"inprocess"``, much faster for models made of many small kernels; RPC for ``rpc:`` targets), the cost
   model of :func:`syno_automl.latency._cost_model`). A task
   whose design space is exhausted before its budget is stopped at once. Records go to a JSON database under
   ``work_dir/relax-<device>`` (one per target, because ``compile_relax`` applies the top record of a workload
   whatever its target). A task that already holds ``>= trials`` records, or was already given a budget of
   ``>= trials`` (``syno_task_budgets.json`` next to the database), is not tuned again, so re-runs are free and
   kernels shared by the two models (the classifier, pooling...) are tuned once. ``seconds`` stops the whole
   model's tuning (every task) at the first measured batch past the deadline;
5. build: ``compile_relax`` (tuned) or ``tvm.compile`` (``trials == 0``: TVM's default schedules; DLight on
   GPUs), then the Relax VM;
6. check (``verify=True``): the VM output on the example inputs must match the torch model (fp32, relative
   tolerance ``rtol`` of the output's max magnitude), otherwise the latency is reported missing;
7. timing: :data:`syno_automl.latency.PROTOCOL` with :func:`syno_automl.latency.time_main`, the function that
   times single kernels (warm-up calls, then the VM's ``time_evaluator`` with ``number``/``repeat``/
   ``min_repeat_ms``; median and inter-quartile range).

Nothing here raises on a failure: the :class:`~syno_automl.latency.Latency` comes back with ``median_ms=None``
and the stage and reason in ``note``. ``isolate=True`` runs the whole measurement in a child process (the
exported program travels as a ``.pt2`` file), killed after ``seconds`` plus a grace period; it also shields the
caller from crashes inside TVM.

Example::

    sub = substitute(model, nn.Conv2d, torch.randn(1, 3, 32, 32), flops_ratio=0.5)
    res = measure_substitution(sub, sub.space.sample(1)[0], torch.randn(1, 3, 32, 32), trials=64)
    res["baseline"].median_ms, res["model"].median_ms, res["speedup"]
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from syno_automl.latency import (
    DEFAULT_WORK_DIR,
    PROTOCOL,
    Latency,
    TimingProtocol,
    _close_runner,
    _ensure_tensor_intrin,
    _ms_logging,
    _records_for,
    _search_strategy,
    _summarize,
    device_name,
    error_note,
    failed_at,
    make_runner,
    parse_target,
    resolve_target,
    run_child,
    run_tuning,
    slug,
    speedup,
    time_main,
    tuning_failure_note,
    upload_remote,
)

__all__ = [
    "export_relax",
    "prepare_relax",
    "relax_run",
    "model_latency",
    "compare_models",
    "measure_substitution",
    "model_metrics",
    "substituted_models",
]


# --------------------------------------------------------------------------------------------------
# torch -> Relax
# --------------------------------------------------------------------------------------------------


def _convert_unfold(node, importer):
    """``aten.unfold(x, dim, size, step)``: ``out[..., i, ..., j] = x[..., i*step + j, ...]``, the window dim
    appended last (torch's layout). Emitted as one TE compute, so FuseOps treats it as an injective op."""
    from tvm import te

    x = importer.env[node.args[0]]
    dim, size, step = (int(a) for a in node.args[1:4])

    def unfold(data):
        shape = [int(s) for s in data.shape]
        d = dim % len(shape)
        length = (shape[d] - size) // step + 1
        out_shape = shape[:d] + [length] + shape[d + 1 :] + [size]

        def body(*idx):
            src = list(idx[:-1])
            src[d] = idx[d] * step + idx[-1]
            return data(*src)

        return te.compute(out_shape, body, name="unfold")

    return importer.block_builder.emit_te(unfold, x)


def _convert_roll(node, importer):
    """``aten.roll(x, shifts, dims)``: ``out[..., i, ...] = x[..., (i - shift) mod n, ...]`` as one TE compute
    (pure index arithmetic). torch's own decomposition (kept out, see :func:`export_relax`) builds an index
    tensor for ``index_select``, which becomes a ``take`` kernel with an integer input: MetaSchedule measures
    candidates on random inputs, so that index tensor would be random (out of bounds: crashes or garbage)."""
    from tvm import te, tirx

    x = importer.env[node.args[0]]
    shifts = node.args[1] if len(node.args) > 1 else node.kwargs.get("shifts")
    dims = node.args[2] if len(node.args) > 2 else node.kwargs.get("dims", [])
    shifts = [int(v) for v in (shifts if isinstance(shifts, (list, tuple)) else [shifts])]
    dims = [int(v) for v in (dims if isinstance(dims, (list, tuple)) else [dims])]
    if not dims or len(dims) != len(shifts):  # roll of the flattened tensor: the importer's own lowering
        return importer._roll(node)

    def roll(data):
        shape = [int(v) for v in data.shape]
        moves = {d % len(shape): sh for d, sh in zip(dims, shifts)}

        def body(*idx):
            src = list(idx)
            for d, sh in moves.items():
                n = shape[d]
                src[d] = tirx.floormod(idx[d] + ((-sh) % n), n)
            return data(*src)

        return te.compute(shape, body, name="roll")

    return importer.block_builder.emit_te(roll, x)


CUSTOM_CONVERTERS = {"unfold.default": _convert_unfold, "roll.default": _convert_roll}


def _as_tuple(example_inputs) -> tuple:
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def export_program(model, example_inputs):
    """``torch.export`` of ``model`` in eval mode (a deep copy: the caller's model is left as it was)."""
    import torch

    model = copy.deepcopy(model).eval()
    with torch.no_grad():
        return torch.export.export(model, _as_tuple(example_inputs))


def export_relax(model_or_program, example_inputs=None):
    """A torch model (or an ``ExportedProgram``) -> a Relax IRModule whose ``main`` takes the user inputs
    only (weights and buffers embedded as constants)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    ep = model_or_program
    if not isinstance(ep, torch.export.ExportedProgram):
        ep = export_program(model_or_program, example_inputs)
    table = torch.export.default_decompositions()
    for op in (torch.ops.aten.roll.default, torch.ops.aten.unfold.default):
        table.pop(op, None)  # converted by CUSTOM_CONVERTERS
    ep = ep.run_decompositions(table)
    return from_exported_program(
        ep,
        keep_params_as_input=False,
        unwrap_unit_return_tuple=True,
        custom_convert_map=CUSTOM_CONVERTERS,
        run_ep_decomposition=False,
    )


def prepare_relax(mod, target):
    """Legalize and fuse (see the module docstring, step 3): every kernel becomes a ``call_tir`` PrimFunc."""
    import tvm
    from tvm import relax

    prep = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.CanonicalizeBindings(),
            relax.get_pipeline("zero"),
        ]
    )
    with target:
        return prep(mod)


def _build_untuned(mod, tgt):
    import tvm

    if tgt.kind.name == "cuda":
        from syno_automl.codegen.tvm import default_gpu_schedule

        mod = default_gpu_schedule(mod, tgt)
    return tvm.compile(mod, target=tgt)


def relax_run(model, example_inputs, target: Any = "llvm") -> np.ndarray:
    """The model's output computed through Relax (default schedules), for checking the import."""
    import tvm
    from tvm import relax

    from syno_automl.codegen.tvm import device_for, make_target

    tgt = make_target(target)
    mod = prepare_relax(export_relax(model, example_inputs), tgt)
    dev = device_for(tgt)
    vm = relax.VirtualMachine(_build_untuned(mod, tgt), dev)
    args = [tvm.runtime.tensor(t.detach().cpu().numpy(), dev) for t in _as_tuple(example_inputs)]
    return _first_output(vm["main"](*args))


def _first_output(out) -> np.ndarray:
    while not hasattr(out, "numpy"):
        out = out[0]
    return out.numpy()


# --------------------------------------------------------------------------------------------------
# tuning
# --------------------------------------------------------------------------------------------------


def _tune_relax(mod, tgt, trials: int, work_dir: str, seconds: float | None, runner, seed: int,
                in_memory: bool = False) -> dict[str, Any]:
    """Tune every task of ``mod`` lacking ``trials`` records; returns the database and bookkeeping."""
    from tvm.s_tir import meta_schedule as ms

    _ensure_tensor_intrin(tgt.kind.name)
    os.makedirs(work_dir, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
    tasks = ms.relax_integration.extract_tasks(mod, tgt)
    # kernels with an integer input (gather indices...) are left to the default schedules: MetaSchedule
    # measures candidates on random inputs, and random indices read out of bounds
    skipped = [t for t in tasks if not _float_inputs_only(t.dispatched[0])]
    tasks = [t for t in tasks if _float_inputs_only(t.dispatched[0])]
    have = [len(_records_for(db, t.dispatched[0], tgt)) for t in tasks]
    # a task whose design space holds fewer distinct schedules than the budget never reaches `trials` records:
    # the budgets already spent are remembered next to the database, so such a task is not re-tuned either
    spent = _load_budgets(work_dir)
    keys = [_budget_key(t.dispatched[0], tgt) for t in tasks]
    todo = [(t, trials - h) for t, h, k in zip(tasks, have, keys) if h < trials and spent.get(k, 0) < trials]
    info: dict[str, Any] = {"tasks": len(tasks), "tuned_tasks": len(todo), "reused": not todo, "errors": [],
                            "deadline_hit": False, "skipped": [t.task_name for t in skipped]}
    t0 = time.time()
    if todo:
        with _ms_logging():  # it runs MetaSchedule's logging dictConfig
            contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                extracted_tasks=[t for t, _ in todo],
                work_dir=work_dir,
                space="post-order-apply",
                strategy=_search_strategy(trials),
                seed=seed,
            )
        # the tuning loop of the layer-level measure (builder, runner, cost model, deadline, exhausted tasks)
        info.update(run_tuning(contexts, weights, work_dir, db, trials, [m for _, m in todo], seconds, runner,
                               in_memory))
        if not info["deadline_hit"]:  # the whole budget was spent on every task
            _save_budgets(work_dir, {_budget_key(t.dispatched[0], tgt): trials for t, _ in todo})
        db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")  # re-read from disk
    counts = [len(_records_for(db, t.dispatched[0], tgt)) for t in tasks]
    info["records"] = sum(counts)
    info["untuned_tasks"] = sum(1 for c in counts if c == 0)
    info["new_trials"] = max(0, sum(counts) - sum(have))
    info["tuning_s"] = time.time() - t0
    info["db"] = db
    return info


def _float_inputs_only(mod) -> bool:
    from syno_automl.codegen.tvm import arg_shapes

    try:
        return all(dtype.startswith(("float", "bfloat")) for _, dtype in arg_shapes(mod["main"]))
    except Exception:
        return False


_BUDGETS = "syno_task_budgets.json"


def _budget_key(mod, tgt) -> str:
    try:
        from tvm_ffi import structural_hash  # TVM 0.27
    except ImportError:  # older TVM
        from tvm.ir import structural_hash

    return f"{structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}|{tgt}"


def _load_budgets(work_dir: str) -> dict[str, int]:
    try:
        with open(os.path.join(work_dir, _BUDGETS)) as f:
            return {str(k): int(v) for k, v in json.load(f).items()}
    except (OSError, ValueError):
        return {}


def _save_budgets(work_dir: str, spent: dict[str, int]) -> None:
    """Merge ``spent`` into the file (max per task), written atomically."""
    merged = _load_budgets(work_dir)
    for k, v in spent.items():
        merged[k] = max(v, merged.get(k, 0))
    fd, tmp = tempfile.mkstemp(dir=work_dir, prefix=".budgets_")
    with os.fdopen(fd, "w") as f:
        json.dump(merged, f, indent=0, sort_keys=True)
    os.replace(tmp, os.path.join(work_dir, _BUDGETS))


# --------------------------------------------------------------------------------------------------
# measure one model
# --------------------------------------------------------------------------------------------------


def model_latency(
    model,
    example_inputs,
    target: Any = "llvm",
    trials: int = 0,
    work_dir: str | None = None,
    seconds: float | None = None,
    *,
    protocol: TimingProtocol = PROTOCOL,
    build_target: Any = None,
    seed: int = 0,
    verify: bool = True,
    rtol: float = 1e-4,
    isolate: bool = False,
    isolate_grace_s: float = 300.0,
    rpc_session_timeout: float = 120.0,
    runner: str | None = None,
) -> Latency:
    """Export ``model`` (a torch module, or an ``ExportedProgram``), tune its kernels (``trials`` per task)
    and time it with the Relax VM. Never raises: a failure gives ``median_ms=None`` with the reason."""
    name = target if isinstance(target, str) else str(target)
    try:
        spec = parse_target(target)
        name = spec.name
    except Exception as exc:
        return Latency.failed(str(target), f"target: {exc}")
    stage = "export"
    try:
        import torch

        inputs = _as_tuple(example_inputs)
        ep = model if isinstance(model, torch.export.ExportedProgram) else export_program(model, inputs)
        reference = None
        if verify:
            with torch.no_grad():
                out = ep.module()(*inputs)
            while isinstance(out, (tuple, list)):
                out = out[0]
            reference = out.detach().cpu().numpy()
    except Exception as exc:
        return Latency.failed(name, error_note(stage, exc))
    if isolate:
        return _run_isolated(ep, inputs, reference, dict(target=target, trials=trials, work_dir=work_dir,
                             seconds=seconds, protocol=protocol, build_target=build_target, seed=seed, rtol=rtol,
                             runner=runner), isolate_grace_s)
    return _measure(ep, inputs, reference, spec, target, trials, work_dir, seconds, protocol, build_target, seed,
                    rtol, rpc_session_timeout, runner)


def _measure(ep, inputs, reference, spec, target, trials, work_dir, seconds, protocol, build_target, seed, rtol,
             rpc_session_timeout, runner_kind=None) -> Latency:
    name = spec.name
    stage = "import"
    tuned_trials, tuning_s, reused, notes = 0, None, False, []
    try:
        import tvm
        from tvm import relax

        from syno_automl.codegen.tvm import device_for

        mod = export_relax(ep)
        stage = "target"
        tgt, why = resolve_target(spec, target, build_target)
        if tgt is None:
            return Latency.failed(name, why)
        stage = "prepare"
        mod = prepare_relax(mod, tgt)
        if trials > 0:
            stage = "tune"
            from tvm.s_tir import meta_schedule as ms

            runner, in_memory = make_runner(spec, runner_kind, rpc_session_timeout)
            wd = os.path.join(work_dir or DEFAULT_WORK_DIR, "relax-" + slug(device_name(spec.name)))
            try:
                info = _tune_relax(mod, tgt, int(trials), wd, seconds, runner, seed, in_memory)
            finally:
                _close_runner(runner)
            tuned_trials, tuning_s, reused = info["records"], info["tuning_s"], info["reused"]
            if info["records"] == 0 and info["tasks"] > 0:
                return Latency.failed(name, tuning_failure_note(info, trials, "trials per task"), 0, tuning_s)
            notes.append(
                f"{info['tasks']} tasks, reused {tuned_trials} records from {wd}"
                if reused
                else f"{info['tasks']} tasks ({info['tuned_tasks']} tuned): {info['new_trials']} new trials in "
                f"{tuning_s:.1f} s ({tuned_trials} records)"
            )
            if info["skipped"]:
                notes.append(f"{len(info['skipped'])} tasks with integer inputs left untuned")
            if info["untuned_tasks"]:
                notes.append(f"{info['untuned_tasks']} tasks without a valid record use default schedules")
            if info["deadline_hit"]:
                notes.append(f"stopped at the {seconds} s budget")
            stage = "build"
            with _ms_logging():
                exe = ms.relax_integration.compile_relax(info["db"], mod, tgt, params=None)
        else:
            notes.append("untuned default schedules")
            stage = "build"
            exe = _build_untuned(mod, tgt)
        stage = "run"
        if spec.kind == "rpc":
            rmod, dev, closer = upload_remote(exe, tgt, spec, rpc_session_timeout, "model.so")
            vm = relax.VirtualMachine(rmod, dev)
        else:
            dev = device_for(tgt)
            vm, closer = relax.VirtualMachine(exe, dev), None
        args = [tvm.runtime.tensor(t.detach().cpu().numpy(), dev) for t in inputs]
        if reference is not None:
            stage = "verify"
            got = _first_output(vm["main"](*args))
            scale = max(1.0, float(np.abs(reference).max()))
            err = float(np.abs(got - reference).max()) if got.shape == reference.shape else float("inf")
            if not err <= rtol * scale:
                return Latency.failed(name, f"verify: output differs from torch (max abs err {err:.3g}, "
                                      f"scale {scale:.3g}, shapes {got.shape} vs {reference.shape})",
                                      tuned_trials, tuning_s)
        stage = "time"
        samples = time_main(vm, dev, args, protocol)  # the protocol of every latency of this project
        del closer
        med, iqr = _summarize(samples)
        return Latency(med, iqr, len(samples), name, tuned_trials, "; ".join(notes), samples, reused, tuning_s)
    except Exception as exc:
        return failed_at(name, stage, exc, tuned_trials, tuning_s, "model_latency")


# --------------------------------------------------------------------------------------------------
# isolation
# --------------------------------------------------------------------------------------------------


def _run_isolated(ep, inputs, reference, job: dict, grace: float) -> Latency:
    import dataclasses

    import torch

    target = job["target"]
    name = target if isinstance(target, str) else str(target)
    seconds = job["seconds"]
    with tempfile.TemporaryDirectory(prefix="syno_e2e_") as tmp:
        try:
            torch.export.save(ep, os.path.join(tmp, "model.pt2"))
            torch.save({"inputs": [t.detach().cpu() for t in inputs], "reference": reference},
                       os.path.join(tmp, "inputs.pt"))
            payload = dict(job)
            payload["protocol"] = dataclasses.asdict(job["protocol"])
            for key in ("target", "build_target"):
                if payload[key] is not None and not isinstance(payload[key], (str, dict)):
                    payload[key] = str(payload[key])
            with open(os.path.join(tmp, "job.json"), "w") as f:
                json.dump(payload, f)
        except Exception as exc:
            return Latency.failed(name, error_note("export", exc))
        out_path = os.path.join(tmp, "result.json")
        return run_child("syno_automl.e2e", [tmp, out_path], out_path, name, seconds, grace)


def _child_main(tmp: str, out_path: str) -> None:
    import torch

    with open(os.path.join(tmp, "job.json")) as f:
        job = json.load(f)
    ep = torch.export.load(os.path.join(tmp, "model.pt2"))
    data = torch.load(os.path.join(tmp, "inputs.pt"), weights_only=False)
    spec = parse_target(job["target"])
    lat = _measure(ep, tuple(data["inputs"]), data["reference"], spec, job["target"], job["trials"], job["work_dir"],
                   job["seconds"], TimingProtocol(**job["protocol"]), job["build_target"], job["seed"], job["rtol"],
                   120.0, job.get("runner"))
    with open(out_path, "w") as f:
        json.dump(lat.to_dict(), f)


# --------------------------------------------------------------------------------------------------
# two models
# --------------------------------------------------------------------------------------------------


def compare_models(baseline, model, example_inputs, target: Any = "llvm", trials: int = 0,
                   work_dir: str | None = None, seconds: float | None = None, **kwargs) -> dict[str, Any]:
    """Tune and time ``baseline`` and ``model`` with the same budget and protocol.

    Returns ``{"baseline": Latency, "model": Latency, "speedup": baseline/model or None}``; ``seconds`` is the
    tuning time budget of each model."""
    base = model_latency(baseline, example_inputs, target, trials, work_dir, seconds, **kwargs)
    new = model_latency(model, example_inputs, target, trials, work_dir, seconds, **kwargs)
    return {"baseline": base, "model": new, "speedup": speedup(base, new)}


def substituted_models(sub, op=None, *, bias: bool | None = None):
    """``(baseline, substituted)``: deep copies of ``sub.model`` running the original layers, and running
    ``op`` in every placeholder (fresh weights; ``op=None``: the operator already applied). ``sub`` and its
    model are left as they were."""
    from syno_automl.placeholder import Placeholder, install, placeholders

    if op is None and sub.operator is None:
        raise ValueError("no operator: pass op, or call sub.apply(op) first")
    saved = sub._installed
    sub._reinsert()  # placeholders in the model (they may have been taken out by restore())
    try:
        baseline = copy.deepcopy(sub.model)
        substituted = copy.deepcopy(sub.model)
    finally:
        if not saved:
            _take_out(sub)
    for _, p in placeholders(baseline):
        p.reset()
    if op is not None:
        install(substituted, op, bias=bias)
    assert all(isinstance(p, Placeholder) for _, p in placeholders(substituted))
    return baseline.eval(), substituted.eval()


def _take_out(sub) -> None:
    """Undo ``_reinsert`` without touching the placeholders' operators (``restore()`` would reset them)."""
    for name, p in sub.placeholders:
        for parent, attr in sub._sites[name]:
            setattr(parent, attr, p.referred_layer)
    sub._installed = False


def measure_substitution(sub, op=None, example_inputs=None, target: Any = "llvm", trials: int = 0,
                         work_dir: str | None = None, seconds: float | None = None, **kwargs) -> dict[str, Any]:
    """Model-level speedup of ``op`` over the layers it replaces (the paper's Fig. 5): the model of a
    :class:`~syno_automl.placeholder.Substitution` with its original layers vs with ``op`` installed, exported
    at the shapes of ``example_inputs`` (batch 1 in the paper), same budget and protocol. See
    :func:`compare_models` for the result."""
    if example_inputs is None:
        raise ValueError("example_inputs is required (e.g. torch.randn(1, 3, 32, 32))")
    try:
        baseline, substituted = substituted_models(sub, op)
    except Exception as exc:
        name = target if isinstance(target, str) else str(target)
        failed = Latency.failed(name, f"substitute: {type(exc).__name__}: {exc}")
        return {"baseline": failed, "model": failed, "speedup": None}
    return compare_models(baseline, substituted, example_inputs, target, trials, work_dir, seconds, **kwargs)


def model_metrics(sub, op=None, example_inputs=None, *, targets: Sequence[Any] = ("llvm",), trials: int = 0,
                  work_dir: str | None = None, seconds: float | None = None, prefix: str = "model_",
                  details: bool = False, **kwargs) -> dict[str, Any]:
    """:func:`measure_substitution` on every target, as MLflow metrics (``<device>`` as in
    :func:`syno_automl.latency.device_name`)::

        {"<prefix>latency_ms.<device>": the substituted model, "<prefix>speedup.<device>": baseline / model,
         "notes": {metric name: why it is missing}}

    plus ``"details": {"baseline.<device>": Latency dict, "model.<device>": ...}`` with ``details=True``."""
    out: dict[str, Any] = {}
    notes: dict[str, str] = {}
    info: dict[str, Any] = {}
    for t in targets:
        try:
            dev = device_name(t)
        except Exception:
            dev = str(t)
        res = measure_substitution(sub, op, example_inputs, t, trials, work_dir, seconds, **kwargs)
        lat_key, sp_key = f"{prefix}latency_ms.{dev}", f"{prefix}speedup.{dev}"
        out[lat_key] = res["model"].median_ms
        out[sp_key] = res["speedup"]
        if out[lat_key] is None:
            notes[lat_key] = res["model"].note
        if out[sp_key] is None:
            notes[sp_key] = (f"baseline: {res['baseline'].note}" if not res["baseline"].ok
                             else f"model: {res['model'].note}")
        info[f"baseline.{dev}"] = res["baseline"].to_dict()
        info[f"model.{dev}"] = res["model"].to_dict()
    out["notes"] = notes
    if details:
        out["details"] = info
    return out


if __name__ == "__main__":  # child of model_latency(isolate=True)
    try:
        _child_main(sys.argv[1], sys.argv[2])
    except Exception:
        traceback.print_exc()
        sys.exit(3)
