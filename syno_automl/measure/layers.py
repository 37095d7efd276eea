"""One operator in the layers it replaces, every target: the figures as MLflow logs them.

:func:`measure_operator` times an operator and the layer it replaces (:mod:`~syno_automl.measure.baseline`) on
every target, both kernels with the same MetaSchedule budget and the same protocol, so that a speedup always
compares like with like; :func:`measure_layers` sums it over every layer an operator replaces (every mapping of
its space), with a JSON-able tuning summary per device.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.echo import shown
from syno_automl.errors import OptionError
from syno_automl.measure.baseline import baseline_kernel, baseline_module, describe, infer_baseline, is_kernel
from syno_automl.measure.kernel import tune_and_time
from syno_automl.measure.result import (
    PROTOCOL,
    Latency,
    TimingProtocol,
    latency_metrics,
    schedules_label,
    schedules_tag,
    speedup,
)
from syno_automl.measure.target import needs_tvm, safe_device_name, torch_device
from syno_automl.measure.timing import time_torch

Progress = Callable[[str], None]  # receives one line of progress text

__all__ = ["measure_operator", "measure_layers", "kernel_summary"]


def measure_operator(
    op,
    mapping: Any = None,
    *,
    baseline: Any = "auto",
    torch_baseline: Any = None,
    targets: Sequence[Any] = ("llvm",),
    trials: int = 0,
    work_dir: str | None = None,
    seconds: float | None = None,
    inductor: bool = True,
    kernel_size: int | None = None,
    protocol: TimingProtocol = PROTOCOL,
    isolate: bool = False,
    seed: int = 0,
    runner: str | None = None,
    details: bool = False,
    progress: Progress | None = None,
    label: str = "",
) -> dict[str, Any]:
    """Tuned latency of an operator and of the layer it replaces, on every target, as MLflow metrics.

    ``op``: an :class:`~syno_automl.space.Operator` (lowered with ``op.program(mapping)``) or a program dict.
    ``baseline``: ``"auto"`` (inferred from the program's shapes, :func:`infer_baseline`: conv2d NCHW of the
    same shape for conv specs, dense for linear specs), ``"conv2d"``, ``"dense"`` (the same, but it must
    match), ``None`` (no speedups), or an explicit kernel: a PrimFunc / IRModule / ``(inputs, out)`` TE pair /
    program dict, or a callable ``program -> kernel``. ``torch_baseline``: the torch module (or callable
    ``program -> module``) timed under Inductor against ``op.to_module(mapping)``; built automatically for
    conv2d/dense baselines. ``kernel_size``: ``k`` of the conv baseline (default: the mapping's ``k``, else 3).

    Every kernel (operator and baseline, each target) is tuned with ``trials`` MetaSchedule trials (and the
    ``seconds`` tuning budget) and timed with ``protocol``: see :func:`tune_and_time` (also for ``isolate``
    and ``runner``).

    Returns, for each target with ``<device>`` = :func:`device_name` (``llvm``, ``cuda``, ``rpc-KEY``)::

        {"latency_ms.<device>": float | None,            # the operator, TVM-tuned
         "speedup.<device>": float | None,               # baseline / operator, same budget and protocol
         "latency_ms.inductor-<device>": float | None,   # the operator's torch module under torch.compile
         "speedup.inductor-<device>": float | None,      # torch baseline / operator, both under torch.compile
         "notes": {metric name: why it is missing, ...}} # only for missing values
    (the inductor keys only with ``inductor=True``), plus ``"details": {name: Latency.to_dict()}`` with
    ``details=True`` (names ``operator.<device>``, ``baseline.<device>``, ``operator.inductor-<device>``,
    ``baseline.inductor-<device>``). Never raises for a tuning/build/timing failure."""
    result: dict[str, Any] = {}
    notes: dict[str, str] = {}
    info: dict[str, Any] = {}
    module = None
    try:
        if isinstance(op, Mapping):
            program = json.loads(json.dumps(op))
        else:
            program = op.program(mapping)
            if kernel_size is None:
                try:
                    full = op.space.mapping(mapping) if isinstance(mapping, int) else (
                        {**op.space.mapping(0), **dict(mapping)} if mapping is not None else op.space.mapping(0))
                    kernel_size = full.get("k")
                except Exception:
                    kernel_size = None
    except Exception as exc:
        reason = f"lower: {type(exc).__name__}: {exc}"
        for t in targets:
            dev = safe_device_name(t)
            keys = [V.latency_metric(dev), V.speedup_metric(dev)]
            if inductor:
                keys += [V.latency_metric(V.INDUCTOR + dev), V.speedup_metric(V.INDUCTOR + dev)]
            for key in keys:
                result[key] = None
                notes[key] = reason
        result["notes"] = notes
        return result

    # the baseline kernel (TVM) and module (torch)
    base_kernel, base_reason, desc = None, "", None
    try:
        if baseline is None:
            base_reason = "no baseline asked"
        elif isinstance(baseline, str):
            desc = infer_baseline(program, kernel_size)
            if baseline not in ("auto", "conv2d", "dense"):
                raise OptionError(f"unknown baseline {shown(baseline)} (auto, conv2d, dense, None, a kernel or a "
                                  f"callable)")
            if desc is None or (baseline != "auto" and desc["kind"] != baseline):
                raise OptionError(f"no {'' if baseline == 'auto' else baseline + ' '}baseline for "
                                  f"{program['input']['shape']} -> {program['output']['shape']}")
            info["baseline"] = describe(desc)
            base_kernel = baseline_kernel(desc) if any(needs_tvm(t) for t in targets) else None
        elif callable(baseline) and not is_kernel(baseline):
            base_kernel = baseline(program)
        else:
            base_kernel = baseline
    except Exception as exc:
        base_reason = f"baseline: {type(exc).__name__}: {exc}"
    base_module, module_reason = None, ""
    eager_targets = [t for t in targets if not needs_tvm(t)]
    if inductor or eager_targets:
        try:
            if torch_baseline is not None:
                import torch

                base_module = torch_baseline if isinstance(torch_baseline, torch.nn.Module) else torch_baseline(program)
            elif desc is not None:
                base_module = baseline_module(desc)
            else:
                module_reason = base_reason or "inductor: no torch baseline for an explicit kernel baseline"
        except Exception as exc:
            module_reason = f"inductor baseline: {type(exc).__name__}: {exc}"

    torch_cache: dict[tuple[str, bool], tuple[Latency, Latency | None]] = {}

    def torch_pair(tdev: str, compile: bool) -> tuple[Latency, Latency | None]:
        """The operator's module and the baseline module, timed with the same protocol, threads and input."""
        nonlocal module
        if (tdev, compile) not in torch_cache:
            import torch

            x = torch.randn(*program["input"]["shape"], device=tdev, generator=None)
            kind = "inductor" if compile else "eager"
            try:
                if module is None:
                    module = op.to_module(mapping) if not isinstance(op, Mapping) else module_from_program(program)
                op_t = time_torch(module.to(tdev).eval(), (x,), compile=compile, protocol=protocol)
            except Exception as exc:
                op_t = Latency.failed(f"{kind}-{tdev}", f"module: {type(exc).__name__}: {exc}")
            base_t = None
            if base_module is not None:
                base_t = time_torch(base_module.to(tdev).eval(), (x,), compile=compile, protocol=protocol)
            torch_cache[tdev, compile] = (op_t, base_t)
        return torch_cache[tdev, compile]

    for t in targets:
        dev = safe_device_name(t)
        lat_key, sp_key = V.latency_metric(dev), V.speedup_metric(dev)
        eager = not needs_tvm(t)
        if eager:  # eager PyTorch: no TVM, no tuning; the same protocol
            op_lat, base_lat = torch_pair(torch_device(t)[0], False)
        else:
            op_lat = tune_and_time(program, t, trials, work_dir, seconds, protocol=protocol, isolate=isolate,
                                   seed=seed, runner=runner, progress=progress, label=f"{label}operator ")
            base_lat = None
            if base_kernel is not None:
                base_lat = tune_and_time(base_kernel, t, trials, work_dir, seconds, protocol=protocol,
                                         isolate=isolate, seed=seed, runner=runner, progress=progress,
                                         label=f"{label}replaced layer ")
        result[lat_key] = op_lat.median_ms
        if not op_lat.ok:
            notes[lat_key] = op_lat.note
        info[f"operator.{dev}"] = op_lat.to_dict()
        if base_lat is not None:
            info[f"baseline.{dev}"] = base_lat.to_dict()
        result[sp_key] = speedup(base_lat, op_lat) if base_lat is not None else None
        if result[sp_key] is None:
            why = module_reason if eager else base_reason
            notes[sp_key] = why or (f"baseline: {base_lat.note}" if base_lat is not None and not base_lat.ok
                                    else f"operator: {op_lat.note}")
        if not inductor or eager:
            continue
        ind_lat_key, ind_sp_key = V.latency_metric(V.INDUCTOR + dev), V.speedup_metric(V.INDUCTOR + dev)
        tdev, why = torch_device(t)
        if tdev is None:
            result[ind_lat_key] = result[ind_sp_key] = None
            notes[ind_lat_key] = notes[ind_sp_key] = why
            continue
        ind_op, ind_base = torch_pair(tdev, True)
        result[ind_lat_key] = ind_op.median_ms
        if not ind_op.ok:
            notes[ind_lat_key] = ind_op.note
        result[ind_sp_key] = speedup(ind_base, ind_op) if ind_base is not None else None
        if result[ind_sp_key] is None:
            notes[ind_sp_key] = module_reason or (f"baseline: {ind_base.note}" if ind_base is not None
                                                  and not ind_base.ok else f"operator: {ind_op.note}")
        info[f"operator.inductor-{dev}"] = ind_op.to_dict()
        if ind_base is not None:
            info[f"baseline.inductor-{dev}"] = ind_base.to_dict()
    result["notes"] = notes
    if details:
        result["details"] = info
    return result


def kernel_summary(d: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parts of a :class:`Latency` dict a tuning summary keeps (no samples)."""
    if d is None:
        return None
    return {"median_ms": d.get("median_ms"), "iqr_ms": d.get("spread_ms"), "repeats": d.get("repeats"),
            "tuned_trials": d.get("tuned_trials"), "reused": d.get("reused"), "tuning_s": d.get("tuning_s"),
            "note": d.get("note", "")}


def sum_or_none(values: Sequence[float | None]) -> float | None:
    return float(sum(values)) if values and all(v is not None for v in values) else None


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den is not None and den > 0 else None


def measure_layers(
    op,
    targets: Sequence[Any] = ("llvm",),
    trials: int = 32,
    seconds: float | None = None,
    *,
    work_dir: str | None = None,
    inductor: bool = True,
    protocol: TimingProtocol = PROTOCOL,
    isolate: bool = False,
    seed: int = 0,
    runner: str | None = None,
    fail_fast: bool = False,
    sizes: Mapping[str, int] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Latency of an operator in every layer it replaces (every mapping of ``op.space``), summed, on every target.

    ``sizes`` overrides variables of every mapping, e.g. ``{"N": 1}`` to time at batch 1 (inference, as the
    paper's latency figures) rather than at the training batch the mappings were recorded with.

    Each layer is :func:`measure_operator` (operator and inferred baseline tuned with the same ``trials``
    MetaSchedule trials and ``seconds`` tuning budget per kernel, timed with ``protocol``; TorchInductor too
    with ``inductor``). ``fail_fast``: stop at the first layer without a TVM latency (operator or baseline) on
    some target (the remaining layers are not measured; the totals are then missing).

    Returns (``<device>`` = :func:`device_name`)::

        {"metrics": {"latency_ms.<device>":, "baseline_latency_ms.<device>":, "speedup.<device>":,
                     "latency_ms.inductor-<device>":, "baseline_latency_ms.inductor-<device>":,
                     "speedup.inductor-<device>":},   # sums over the layers; None when a layer is missing
         "notes": {metric name: "layer i: why it is missing"},
         "devices": {"<device>": {                    # JSON-able: the tuning summary of that device
             "target":, "trials":, "seconds":, "tuned_trials": (trials, 0 when untuned), "schedules": (label),
             "protocol": {...}, "latency_ms":, "baseline_ms":, "speedup":,
             "inductor_ms":, "inductor_baseline_ms":, "inductor_speedup":,  (with inductor)
             "layers": [{"layer": i, "sizes": {...}, "replaced": "conv2d ...", "operator": {median_ms, iqr_ms,
                         tuned_trials, reused, tuning_s, note}, "baseline": {...}, "speedup":,
                         "inductor": {"operator":, "baseline":, "speedup":}, "notes": {...}}, ...],
             "notes": {...}}}}
    (the inductor keys only with ``inductor=True``), plus ``"tag"`` per device: :func:`schedules_tag`, the label
    every printed or logged speedup carries (operator and replaced layer always share it). The target ``"torch"``
    times both in eager PyTorch (no TVM, no tuning; ``schedules`` is :data:`EAGER`, no Inductor keys).
    ``progress``: called with one line when a layer starts and per measured tuning batch. Never raises for a
    lowering/tuning/build/timing failure."""
    space = op.space
    devices = [(t, safe_device_name(t)) for t in targets]
    untuned = int(trials) <= 0
    eager = {dev: not needs_tvm(t) for t, dev in devices}
    summaries: dict[str, dict[str, Any]] = {
        dev: {"target": t if isinstance(t, str) else str(t), "trials": 0 if eager[dev] else int(trials),
              "seconds": None if eager[dev] else seconds,
              "tuned_trials": 0 if untuned or eager[dev] else int(trials),
              "schedules": schedules_label(trials, seconds, eager=eager[dev]),
              "tag": schedules_tag(trials, eager=eager[dev]),
              "protocol": dataclasses.asdict(protocol), "layers": []}
        for t, dev in devices}
    for i in range(space.num_mappings):
        mapping: Any = i if not sizes else {**space.mapping(i), **sizes}
        if progress is not None:
            progress(f"layer {i + 1}/{space.num_mappings}: measuring on {', '.join(d for _, d in devices)}")
        m = measure_operator(op, mapping, targets=targets, trials=trials, work_dir=work_dir, seconds=seconds,
                             inductor=inductor, protocol=protocol, isolate=isolate, seed=seed, runner=runner,
                             details=True, progress=progress, label=f"layer {i}: ")
        info = m.get("details", {})
        failed = False
        for _, dev in devices:
            layer: dict[str, Any] = {
                "layer": i, "sizes": dict(space.mapping(i)) if not sizes else dict(mapping),
                "replaced": info.get("baseline"),
                "operator": kernel_summary(info.get(f"operator.{dev}")),
                "baseline": kernel_summary(info.get(f"baseline.{dev}")),
                "speedup": m.get(V.speedup_metric(dev)),
                "notes": {k: v for k, v in m["notes"].items() if k.split(".", 1)[-1] in (dev, V.INDUCTOR + dev)},
            }
            if layer["operator"] is None:  # lowering failed: no kernel at all
                layer["operator"] = {"median_ms": None, "note": m["notes"].get(V.latency_metric(dev), "")}
            if inductor and not eager[dev]:
                layer["inductor"] = {"operator": kernel_summary(info.get(f"operator.inductor-{dev}")),
                                     "baseline": kernel_summary(info.get(f"baseline.inductor-{dev}")),
                                     "speedup": m.get(V.speedup_metric(V.INDUCTOR + dev))}
            summaries[dev]["layers"].append(layer)
            failed = failed or m.get(V.latency_metric(dev)) is None or (layer["baseline"] or {}).get("median_ms") is None
        if fail_fast and failed:
            break
    notes: dict[str, str] = {}
    for _, dev in devices:
        s = summaries[dev]
        layers = s["layers"]
        complete = len(layers) == space.num_mappings

        def total(kind: str, which: str, key: str, fallback: str) -> float | None:
            """Sum over the layers of ``layer[kind][which]["median_ms"]`` (kind "": the TVM kernels); the first
            missing one gives the note of ``key`` (its own note, else the layer's note ``fallback``)."""
            values = []
            for layer in layers:
                entry = (layer.get(kind) or {}) if kind else layer
                lat = entry.get(which) or {}
                values.append(lat.get("median_ms"))
                if lat.get("median_ms") is None and key not in notes:
                    why = lat.get("note") or layer["notes"].get(fallback, "")
                    notes[key] = f"layer {layer['layer']}: {why or 'not measured'}"
            if not complete and key not in notes:
                notes[key] = f"layers {len(layers)}-{space.num_mappings - 1}: not measured (an earlier layer failed)"
            return sum_or_none(values) if complete else None

        names = [("", dev, "latency_ms", "baseline_ms", "speedup")]
        if inductor and not eager[dev]:
            names.append(("inductor", V.INDUCTOR + dev, "inductor_ms", "inductor_baseline_ms", "inductor_speedup"))
        for kind, mdev, op_key, base_key, sp_key in names:
            lat_name, base_name, sp_name = V.latency_metric(mdev), V.baseline_latency_metric(mdev), V.speedup_metric(mdev)
            s[op_key] = total(kind, "operator", lat_name, lat_name)
            s[base_key] = total(kind, "baseline", base_name, sp_name)
            s[sp_key] = ratio(s[base_key], s[op_key])
            if s[sp_key] is None and sp_name not in notes:
                notes[sp_name] = notes.get(base_name) or notes.get(lat_name) or "no speedup"
        s["notes"] = {k: v for k, v in notes.items() if k.split(".", 1)[-1] in (dev, V.INDUCTOR + dev)}
    # the metric names and values come from the summaries, as the search and `tune` log them
    return {"metrics": latency_metrics(summaries), "notes": notes, "devices": summaries}


def module_from_program(program: Mapping[str, Any]):
    from syno_automl.codegen.torch import build_module

    return build_module(program)
