"""Learning-rate schedules stepped once per optimizer step, each a factor of the base rate over a known length.

``SCHEDULES`` names the shapes a task module takes (``scheduler=``): every one but ``none`` completes within the
training it is built for (it ends at 0, or near it, at ``total_steps``), so that a short training (a search trial)
and a long one (the final stage) each run a whole schedule over their own length.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR

from syno_automl.errors import OptionError

__all__ = ["SCHEDULES", "ONECYCLE_PEAK", "ONECYCLE_WARMUP", "schedule_factor", "build_schedule",
           "cosine_with_warmup", "lightning_scheduler"]

SCHEDULES = ("cosine", "linear", "onecycle", "none")
ONECYCLE_PEAK = 4.0      # one-cycle: the peak rate, in multiples of the base rate (Smith's super-convergence)
ONECYCLE_WARMUP = 0.25   # one-cycle: the share of the steps spent rising from the base rate to the peak


def schedule_factor(name: str, total_steps: float, warmup_steps: int = 0) -> Callable[[int], float]:
    """The factor of the base rate at each optimizer step for the schedule `name` over `total_steps`.

    cosine: linear warm-up over ``warmup_steps``, then cosine decay to 0 at ``total_steps``; linear: the same with
    a linear decay; onecycle: a linear rise from 1 to ``ONECYCLE_PEAK`` over ``ONECYCLE_WARMUP`` of the steps, then
    cosine decay to 0; none: 1 after the warm-up. When ``total_steps`` is unknown (infinite, e.g. no epoch/step
    limit) every schedule stays constant after its warm-up.
    """
    if name not in SCHEDULES:
        raise OptionError(f"scheduler must be one of {', '.join(SCHEDULES)}, got {name!r}")
    finite = math.isfinite(total_steps)
    if name == "onecycle" and finite:
        warmup = max(1, int(round(ONECYCLE_WARMUP * total_steps)))
        return _decaying(lambda step: 1.0 + (ONECYCLE_PEAK - 1.0) * step / warmup, warmup, total_steps,
                         ONECYCLE_PEAK, _cosine)
    decay = _linear if name == "linear" else _cosine
    return _decaying(lambda step: (step + 1) / warmup_steps, warmup_steps, total_steps if name != "none" else
                     math.inf, 1.0, decay)


def _cosine(progress: float) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _linear(progress: float) -> float:
    return 1.0 - progress


def _decaying(rise: Callable[[int], float], warmup_steps: int, total_steps: float, peak: float,
              decay: Callable[[float], float]) -> Callable[[int], float]:
    # one closed-form factor rather than SequentialLR([LinearLR, CosineAnnealingLR]): CosineAnnealingLR is periodic
    # past T_max (the rate climbs back up) and cannot be built for an unknown length; this factor stays at 0 after
    # the end and constant when the length is infinite
    def factor(step: int) -> float:
        if step < warmup_steps:
            return rise(step)
        if not math.isfinite(total_steps):
            return peak
        span = max(1.0, total_steps - warmup_steps)
        return peak * decay(min(1.0, (step - warmup_steps) / span))

    return factor


def build_schedule(optimizer: torch.optim.Optimizer, name: str, total_steps: float,
                   warmup_steps: int = 0) -> LambdaLR:
    """The LambdaLR of :func:`schedule_factor` on `optimizer`."""
    return LambdaLR(optimizer, schedule_factor(name, total_steps, warmup_steps))


def cosine_with_warmup(optimizer: torch.optim.Optimizer, total_steps: float, warmup_steps: int = 0) -> LambdaLR:
    """Linear warm-up over ``warmup_steps``, then cosine decay to 0 at ``total_steps`` (constant after the
    warm-up when ``total_steps`` is infinite)."""
    return build_schedule(optimizer, "cosine", total_steps, warmup_steps)


def lightning_scheduler(scheduler: LambdaLR) -> dict:
    """The dict Lightning expects for a per-step scheduler."""
    return {"scheduler": scheduler, "interval": "step", "frequency": 1}
