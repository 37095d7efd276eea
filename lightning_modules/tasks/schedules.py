"""Learning-rate schedules stepped once per optimizer step."""
from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR


def cosine_with_warmup(optimizer: torch.optim.Optimizer, total_steps: float, warmup_steps: int = 0) -> LambdaLR:
    """Linear warm-up over ``warmup_steps``, then cosine decay to 0 at ``total_steps``.

    When ``total_steps`` is unknown (infinite, e.g. no epoch/step limit) the rate stays constant after warm-up.
    """
    # One closed-form LambdaLR rather than SequentialLR([LinearLR, CosineAnnealingLR]): that chain gives the same
    # rates (to 1e-16 over 100 steps with 4 of warm-up), but CosineAnnealingLR is periodic past T_max (the rate
    # climbs back up) and cannot be built for an unknown length; this factor stays at 0 after the end and
    # constant when the length is infinite.

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if not math.isfinite(total_steps):
            return 1.0
        span = max(1.0, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / span)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return LambdaLR(optimizer, factor)


def lightning_scheduler(scheduler: LambdaLR) -> dict:
    """The dict Lightning expects for a per-step scheduler."""
    return {"scheduler": scheduler, "interval": "step", "frequency": 1}
