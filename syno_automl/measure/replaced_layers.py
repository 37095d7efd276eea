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
from dataclasses import dataclass, field
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.echo import shown
from syno_automl.errors import OptionError
from syno_automl.measure.baseline import baseline_kernel, baseline_module, describe, infer_baseline, is_kernel
from syno_automl.measure.kernel import tune_and_time
from syno_automl.measure.request import MeasureRequest
from syno_automl.measure.result import (
    Latency,
    TimingProtocol,
    latency_metrics,
    schedules_label,
    schedules_tag,
    speedup,
)
from syno_automl.measure.target import needs_tvm, safe_device_name, torch_device
from syno_automl.measure.timing import paired_protocol_of, time_torch, time_torch_pair

Progress = Callable[[str], None]  # receives one line of progress text

__all__ = ["measure_operator", "measure_layers", "kernel_summary"]


def measure_operator(
    op,
    mapping: Any = None,
    request: MeasureRequest = MeasureRequest(),
    *,
    baseline: Any = "auto",
    torch_baseline: Any = None,
    kernel_size: int | None = None,
    details: bool = False,
    progress: Progress | None = None,
    label: str = "",
) -> dict[str, Any]:
    """Tuned latency of an operator and of the layer it replaces, on every target of ``request``, as MLflow metrics.

    ``op``: an :class:`~syno_automl.space.Operator` (lowered with ``op.program(mapping)``) or a program dict.
    ``baseline``: ``"auto"`` (inferred from the program's shapes, :func:`infer_baseline`: conv2d NCHW / conv1d NCW
    of the same shape for conv specs, dense for linear specs), ``"conv2d"``, ``"conv1d"``, ``"dense"`` (the same,
    but it must match), ``None`` (no speedups), or an explicit kernel: a PrimFunc / IRModule / ``(inputs, out)``
    TE pair / program dict, or a callable ``program -> kernel``. ``torch_baseline``: the torch module (or callable
    ``program -> module``) timed under Inductor against ``op.to_module(mapping)``; built automatically for
    conv2d/conv1d/dense baselines. ``kernel_size``: ``k`` of the conv baseline (default: the mapping's ``k``, else 3).

    Every kernel (operator and baseline, each target) is tuned and timed with the same
    :class:`~syno_automl.measure.request.MeasureRequest` (``trials`` MetaSchedule trials, the ``seconds`` tuning
    budget, ``protocol``...): see :func:`tune_and_time`.

    Returns, for each target with ``<device>`` = :func:`device_name` (``llvm``, ``cuda``, ``rpc-KEY``)::

        {"latency_ms.<device>": float | None,            # the operator, TVM-tuned
         "speedup.<device>": float | None,               # baseline / operator, same budget and protocol
         "latency_ms.inductor-<device>": float | None,   # the operator's torch module under torch.compile
         "speedup.inductor-<device>": float | None,      # torch baseline / operator, both under torch.compile
         "notes": {metric name: why it is missing, ...}} # only for missing values
    (the inductor keys only with ``request.inductor``), plus ``"details": {name: Latency.to_dict()}`` with
    ``details=True`` (names ``operator.<device>``, ``baseline.<device>``, ``operator.inductor-<device>``,
    ``baseline.inductor-<device>``). Never raises for a tuning/build/timing failure."""
    try:
        program, kernel_size = _lower(op, mapping, kernel_size)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return _lowering_failed(request, f"lower: {type(exc).__name__}: {exc}")
    fig = _Figures()
    base = _baselines(program, baseline, torch_baseline, kernel_size, request, fig.info)
    pairs = _TorchPairs(op, mapping, program, base.module, request.protocol)
    for t in request.targets:
        eager = _kernel_metrics(fig, t, program, base, pairs, request, progress, label)
        if request.inductor and not eager:
            _inductor_metrics(fig, t, base, pairs)
    fig.result["notes"] = fig.notes
    if details:
        fig.result["details"] = fig.info
    return fig.result


@dataclass
class _Figures:
    """What :func:`measure_operator` returns, filled target by target: metrics, their notes, the details."""

    result: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Baselines:
    """The layer an operator replaces, as a TVM kernel and as a torch module, or why there is none."""

    kernel: Any = None
    reason: str = ""
    module: Any = None
    module_reason: str = ""


def _lower(op, mapping: Any, kernel_size: int | None) -> tuple[dict[str, Any], int | None]:
    """The operator's program dict, and the conv baseline's ``k`` (given, else the mapping's)."""
    if isinstance(op, Mapping):
        return json.loads(json.dumps(op)), kernel_size
    program = op.program(mapping)
    if kernel_size is None:
        try:
            full = op.space.mapping(mapping) if isinstance(mapping, int) else (
                {**op.space.mapping(0), **dict(mapping)} if mapping is not None else op.space.mapping(0))
            kernel_size = full.get("k")
        except Exception:  # noqa: BLE001 -- no k in the mapping: the baseline goes without it
            kernel_size = None
    return program, kernel_size


def _lowering_failed(request: MeasureRequest, reason: str) -> dict[str, Any]:
    """Every metric missing, for ``reason``."""
    result: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for t in request.targets:
        dev = safe_device_name(t)
        keys = [V.latency_metric(dev), V.speedup_metric(dev)]
        if request.inductor:
            keys += [V.latency_metric(V.INDUCTOR + dev), V.speedup_metric(V.INDUCTOR + dev)]
        for key in keys:
            result[key] = None
            notes[key] = reason
    result["notes"] = notes
    return result


def _baselines(program: Mapping[str, Any], baseline: Any, torch_baseline: Any, kernel_size: int | None,
               request: MeasureRequest, info: dict[str, Any]) -> _Baselines:
    """The baseline kernel (TVM) and module (torch) of :func:`measure_operator`; ``info["baseline"]`` describes an
    inferred one."""
    base, desc = _Baselines(), None
    try:
        if baseline is None:
            base.reason = "no baseline asked"
        elif isinstance(baseline, str):
            desc = infer_baseline(program, kernel_size)
            if baseline not in ("auto", "conv2d", "conv1d", "dense"):
                raise OptionError(f"unknown baseline {shown(baseline)} (auto, conv2d, conv1d, dense, None, a kernel or "
                                  f"a callable)")
            if desc is None or (baseline != "auto" and desc["kind"] != baseline):
                raise OptionError(f"no {'' if baseline == 'auto' else baseline + ' '}baseline for "
                                  f"{program['input']['shape']} -> {program['output']['shape']}")
            info["baseline"] = describe(desc)
            base.kernel = baseline_kernel(desc) if any(needs_tvm(t) for t in request.targets) else None
        elif callable(baseline) and not is_kernel(baseline):
            base.kernel = baseline(program)
        else:
            base.kernel = baseline
    except Exception as exc:  # noqa: BLE001 -- no baseline: the reason is the note
        base.reason = f"baseline: {type(exc).__name__}: {exc}"
    eager_targets = [t for t in request.targets if not needs_tvm(t)]
    if request.inductor or eager_targets:
        try:
            if torch_baseline is not None:
                import torch

                base.module = (torch_baseline if isinstance(torch_baseline, torch.nn.Module)
                               else torch_baseline(program))
            elif desc is not None:
                base.module = baseline_module(desc)
            else:
                base.module_reason = base.reason or "inductor: no torch baseline for an explicit kernel baseline"
        except Exception as exc:  # noqa: BLE001 -- no torch baseline: the reason is the note
            base.module_reason = f"inductor baseline: {type(exc).__name__}: {exc}"
    return base


class _TorchPairs:
    """The operator's module against the baseline module by the one speed protocol (interleaved, a ratio with its
    interval: measure.timing.time_torch_pair), once per (torch device, compiled or not); the operator alone by
    the same warm-up and calibration where no baseline module exists."""

    def __init__(self, op, mapping: Any, program: Mapping[str, Any], base_module: Any, protocol: TimingProtocol):
        self.op, self.mapping, self.program = op, mapping, program
        self.base_module, self.protocol = base_module, protocol
        self.module: Any = None  # a torch module, built on first use: the TVM-only targets never need it
        self.cache: dict[tuple[str, bool], tuple[Latency, Latency | None, float | None]] = {}

    def __call__(self, tdev: str, compile: bool) -> tuple[Latency, Latency | None, float | None]:
        """(the operator's latency, the baseline's or None, the protocol's speedup or None)."""
        if (tdev, compile) not in self.cache:
            import torch

            x = torch.randn(*self.program["input"]["shape"], device=tdev, generator=None)
            kind = "inductor" if compile else "eager"
            try:
                if self.module is None:
                    self.module = (self.op.to_module(self.mapping) if not isinstance(self.op, Mapping)
                                   else module_from_program(self.program))
                module = self.module.to(tdev).eval()
            except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
                failed = Latency.failed(f"{kind}-{tdev}", f"module: {type(exc).__name__}: {exc}")
                self.cache[tdev, compile] = (failed, None, None)
                return self.cache[tdev, compile]
            if self.base_module is None:
                self.cache[tdev, compile] = (time_torch(module, (x,), compile=compile, protocol=self.protocol),
                                             None, None)
            else:
                op_t, base_t, estimate = time_torch_pair(module, self.base_module.to(tdev).eval(), (x,), compile,
                                                         paired_protocol_of(self.protocol))
                self.cache[tdev, compile] = (op_t, base_t, estimate.ratio if estimate is not None else None)
        return self.cache[tdev, compile]


def _kernel_metrics(fig: _Figures, t: Any, program: Mapping[str, Any], base: _Baselines, pairs: _TorchPairs,
                    request: MeasureRequest, progress: Progress | None, label: str) -> bool:
    """Operator and baseline on target ``t``: TVM-tuned, or eager PyTorch for ``"torch"`` (no TVM, no tuning; the
    same protocol). Returns whether ``t`` is eager."""
    dev = safe_device_name(t)
    lat_key, sp_key = V.latency_metric(dev), V.speedup_metric(dev)
    eager = not needs_tvm(t)
    if eager:
        tdev, _ = torch_device(t)
        assert tdev is not None  # "torch" runs on CUDA or the CPU
        op_lat, base_lat, paired = pairs(tdev, False)
    else:
        paired = None
        op_lat = tune_and_time(program, t, request, progress=progress, label=f"{label}operator ")
        base_lat = None
        if base.kernel is not None:
            base_lat = tune_and_time(base.kernel, t, request, progress=progress, label=f"{label}replaced layer ")
    result, notes = fig.result, fig.notes
    result[lat_key] = op_lat.median_ms
    if not op_lat.ok:
        notes[lat_key] = op_lat.note
    fig.info[f"operator.{dev}"] = op_lat.to_dict()
    if base_lat is not None:
        fig.info[f"baseline.{dev}"] = base_lat.to_dict()
    result[sp_key] = paired if paired is not None else speedup(base_lat, op_lat) if base_lat is not None else None
    if result[sp_key] is None:
        why = base.module_reason if eager else base.reason
        notes[sp_key] = why or (f"baseline: {base_lat.note}" if base_lat is not None and not base_lat.ok
                                else f"operator: {op_lat.note}")
    return eager


def _inductor_metrics(fig: _Figures, t: Any, base: _Baselines, pairs: _TorchPairs) -> None:
    """Operator and baseline torch modules under ``torch.compile``, on the torch device of target ``t``."""
    dev = safe_device_name(t)
    ind_lat_key, ind_sp_key = V.latency_metric(V.INDUCTOR + dev), V.speedup_metric(V.INDUCTOR + dev)
    result, notes = fig.result, fig.notes
    tdev, why = torch_device(t)
    if tdev is None:
        result[ind_lat_key] = result[ind_sp_key] = None
        notes[ind_lat_key] = notes[ind_sp_key] = why
        return
    ind_op, ind_base, paired = pairs(tdev, True)
    result[ind_lat_key] = ind_op.median_ms
    if not ind_op.ok:
        notes[ind_lat_key] = ind_op.note
    result[ind_sp_key] = paired
    if result[ind_sp_key] is None:
        notes[ind_sp_key] = base.module_reason or (f"baseline: {ind_base.note}" if ind_base is not None
                                                   and not ind_base.ok else f"operator: {ind_op.note}")
    fig.info[f"operator.inductor-{dev}"] = ind_op.to_dict()
    if ind_base is not None:
        fig.info[f"baseline.inductor-{dev}"] = ind_base.to_dict()


def kernel_summary(d: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parts of a :class:`Latency` dict a tuning summary keeps (no samples)."""
    if d is None:
        return None
    return {"median_ms": d.get("median_ms"), "iqr_ms": d.get("spread_ms"), "repeats": d.get("repeats"),
            "tuned_trials": d.get("tuned_trials"), "reused": d.get("reused"), "tuning_s": d.get("tuning_s"),
            "note": d.get("note", "")}


def sum_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(sum(present)) if values and len(present) == len(values) else None


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den is not None and den > 0 else None


def measure_layers(
    op,
    request: MeasureRequest = MeasureRequest(),
    *,
    fail_fast: bool = False,
    sizes: Mapping[str, int] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Latency of an operator in every layer it replaces (every mapping of ``op.space``), summed, on every target
    of ``request``.

    ``sizes`` overrides variables of every mapping, e.g. ``{"N": 1}`` to time at batch 1 (inference, as the
    paper's latency figures) rather than at the training batch the mappings were recorded with.

    Each layer is :func:`measure_operator` with the same ``request`` (operator and inferred baseline tuned with the
    same ``trials`` MetaSchedule trials and ``seconds`` tuning budget per kernel, timed with ``protocol``;
    TorchInductor too with ``inductor``). ``fail_fast``: stop at the first layer without a TVM latency (operator or
    baseline) on some target (the remaining layers are not measured; the totals are then missing).

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
    (the inductor keys only with ``request.inductor``), plus ``"tag"`` per device: :func:`schedules_tag`, the label
    every printed or logged speedup carries (operator and replaced layer always share it). The target ``"torch"``
    times both in eager PyTorch (no TVM, no tuning; ``schedules`` is :data:`EAGER`, no Inductor keys).
    ``progress``: called with one line when a layer starts and per measured tuning batch. Never raises for a
    lowering/tuning/build/timing failure."""
    space = op.space
    devices = [(t, safe_device_name(t)) for t in request.targets]
    eager = {dev: not needs_tvm(t) for t, dev in devices}
    summaries = _device_summaries(devices, eager, request)
    for i in range(space.num_mappings):
        mapping: Any = i if not sizes else {**space.mapping(i), **sizes}
        if progress is not None:
            progress(f"layer {i + 1}/{space.num_mappings}: measuring on {', '.join(d for _, d in devices)}")
        m = measure_operator(op, mapping, request, details=True, progress=progress, label=f"layer {i}: ")
        layer_sizes = space.mapping(i) if not sizes else mapping
        failed = _add_layer(summaries, devices, m, i, layer_sizes, eager, request.inductor)
        if fail_fast and failed:
            break
    notes: dict[str, str] = {}
    for _, dev in devices:
        _device_totals(summaries[dev], dev, space.num_mappings, notes, request.inductor and not eager[dev])
    # the metric names and values come from the summaries, as the search and `tune` log them
    return {"metrics": latency_metrics(summaries), "notes": notes, "devices": summaries}


def _device_summaries(devices: Sequence[tuple[Any, str]], eager: Mapping[str, bool],
                      request: MeasureRequest) -> dict[str, dict[str, Any]]:
    """The tuning summary of each device before any layer: how its kernels are scheduled and timed."""
    trials, seconds = request.trials, request.seconds
    untuned = trials <= 0
    return {
        dev: {"target": t if isinstance(t, str) else str(t), "trials": 0 if eager[dev] else trials,
              "seconds": None if eager[dev] else seconds,
              "tuned_trials": 0 if untuned or eager[dev] else trials,
              "schedules": schedules_label(trials, seconds, eager=eager[dev]),
              "tag": schedules_tag(trials, eager=eager[dev]),
              "protocol": dataclasses.asdict(request.protocol), "layers": []}
        for t, dev in devices}


def _add_layer(summaries: dict[str, dict[str, Any]], devices: Sequence[tuple[Any, str]], m: Mapping[str, Any],
               i: int, sizes: Mapping[str, int], eager: Mapping[str, bool], inductor: bool) -> bool:
    """Layer ``i`` (:func:`measure_operator`'s ``m``, at ``sizes``) in every device's summary; whether a TVM
    latency (operator or baseline) is missing on some device."""
    info = m.get("details", {})
    failed = False
    for _, dev in devices:
        layer: dict[str, Any] = {
            "layer": i, "sizes": dict(sizes),
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
    return failed


def _device_totals(s: dict[str, Any], dev: str, num_layers: int, notes: dict[str, str], inductor: bool) -> None:
    """The totals of one device's summary ``s`` over its layers (``inductor``: the Inductor ones too); the first
    reason a total is missing goes to ``notes`` (shared by every device), the device's own to ``s["notes"]``."""
    layers = s["layers"]
    complete = len(layers) == num_layers

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
            notes[key] = f"layers {len(layers)}-{num_layers - 1}: not measured (an earlier layer failed)"
        return sum_or_none(values) if complete else None

    names = [("", dev, "latency_ms", "baseline_ms", "speedup")]
    if inductor:
        names.append(("inductor", V.INDUCTOR + dev, "inductor_ms", "inductor_baseline_ms", "inductor_speedup"))
    for kind, mdev, op_key, base_key, sp_key in names:
        lat_name, base_name, sp_name = V.latency_metric(mdev), V.baseline_latency_metric(mdev), V.speedup_metric(mdev)
        s[op_key] = total(kind, "operator", lat_name, lat_name)
        s[base_key] = total(kind, "baseline", base_name, sp_name)
        s[sp_key] = ratio(s[base_key], s[op_key])
        if s[sp_key] is None and sp_name not in notes:
            notes[sp_name] = notes.get(base_name) or notes.get(lat_name) or "no speedup"
    s["notes"] = {k: v for k, v in notes.items() if k.split(".", 1)[-1] in (dev, V.INDUCTOR + dev)}


def module_from_program(program: Mapping[str, Any]):
    from syno_automl.codegen.torch import build_module

    return build_module(program)
