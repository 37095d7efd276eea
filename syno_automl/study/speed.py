"""Whole-model speed on a speed target, by the speed protocol (syno_automl.measure.paired): each operator's
substituted model against the original, in interleaved blocks, as a ratio with its 95 % interval; and a control
(the original against a copy of itself) that shows the protocol's own noise under the same conditions.

Inference (eval mode, ``torch.inference_mode``) on the task's timing batch, on the target's device, eager or
``torch.compile``d once per model (the warm-up compiles, never timed), under the training's precision (bf16 and
fp16 through ``torch.autocast``), `threads` torch threads on a CPU.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syno_automl.measure.paired import SPEED_PROTOCOL, Conditions, PairedProtocol, SpeedupEstimate, paired_speedup
from syno_automl.runtime import SpeedTarget

__all__ = ["SpeedMeasurement", "measure_speedups", "precision_name"]


@dataclass
class SpeedMeasurement:
    """What :func:`measure_speedups` found: an estimate per operator (None: could not be built or timed)."""

    label: str                                   # how it was measured, beginning with the target
    estimates: list[SpeedupEstimate | None] = field(default_factory=list)
    control: SpeedupEstimate | None = None       # the original against itself
    baseline_ms: float | None = None
    conditions: Conditions | None = None

    @property
    def measured(self) -> bool:
        return self.baseline_ms is not None


def precision_name(precision: str) -> str:
    """Lightning's precision setting as the conditions name it."""
    return {"bf16-mixed": "bf16", "16-mixed": "fp16"}.get(precision, "fp32")


def _autocast(device: str, precision: str) -> Any:
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    return torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def _caller(model: Any, example: Any, device: str, precision: str) -> Callable[[], Any]:
    import torch

    def call() -> Any:
        with torch.inference_mode(), _autocast(device, precision):
            return model(example)
    return call


def _models(context: Any, ops: list[Any]) -> tuple[Any, list[Any]]:
    """The original model and one substituted model per operator (None: it cannot be installed)."""
    from syno_automl.measure.substituted_model import substituted_models
    from syno_automl.placeholder import placeholders

    baseline: Any = None
    models: list[Any] = []
    for op in ops:
        try:
            base, model = substituted_models(context.substitution, op)
        except Exception:  # noqa: BLE001 -- an operator that cannot be installed: unmeasured
            models.append(None)
            continue
        baseline = baseline if baseline is not None else base
        models.append(model)
    if baseline is None:
        baseline = context.substitution.copy_model().eval()
        for _, p in placeholders(baseline):
            p.reset()
    return baseline, models


def measure_speedups(context: Any, ops: list[Any], target: SpeedTarget | None = None, threads: int | None = None,
                     protocol: PairedProtocol = SPEED_PROTOCOL) -> SpeedMeasurement:
    """Each of `ops` substituted, timed against the original model on `target` (default the context's resolved
    speed target). Never raises: a model that cannot be built or timed gets None."""
    import torch

    from syno_automl.measure.timing import torch_threads

    target = target or context.resolved.speed
    if target.cuda and not torch.cuda.is_available():
        return SpeedMeasurement(f"{target}: not timed (no CUDA device here)", [None] * len(ops))
    threads = threads or torch.get_num_threads()
    example = context.task.timing_batch(context).to(target.device)
    precision = precision_name(context.config.precision)
    where = f"cpu ({threads} thread{'s' if threads > 1 else ''})" if target.device == "cpu" \
        else torch.cuda.get_device_name()
    conditions = Conditions.here(where, threads, precision, context.task.timing_label(example))
    label = (f"{target}: torch {'compiled' if target.compiled else 'eager'} inference, "
             f"{conditions.batch}, {where}, {precision}")
    baseline, models = _models(context, ops)
    runnable = [m if m is None else m.to(target.device) for m in [baseline, *models]]
    if target.compiled:
        runnable = [m if m is None else torch.compile(m, dynamic=False) for m in runnable]
    calls = [None if m is None else _caller(m, example, target.device, precision) for m in runnable]
    sync = torch.cuda.synchronize if target.cuda else (lambda: None)
    result = SpeedMeasurement(label, conditions=conditions)
    with torch_threads(threads):
        result.control = _timed(calls[0], calls[0], protocol, sync, conditions)
        for call in calls[1:]:
            result.estimates.append(_timed(calls[0], call, protocol, sync, conditions))
    if result.control is not None:
        result.baseline_ms = result.control.baseline_ms
    return result


def _timed(baseline: Callable[[], Any] | None, candidate: Callable[[], Any] | None, protocol: PairedProtocol,
           sync: Callable[[], None], conditions: Conditions) -> SpeedupEstimate | None:
    if baseline is None or candidate is None:
        return None
    try:
        return paired_speedup(baseline, candidate, protocol, sync=sync, conditions=conditions)
    except Exception:  # noqa: BLE001 -- a model that fails to run is unmeasured, the others still count
        return None
