"""Errors raised by the task modules."""
from __future__ import annotations

import torch

from syno_automl.errors import SynoError


class NonFiniteLossError(SynoError, ValueError):
    """The training loss became NaN or infinite; the message names the step."""


def check_finite_loss(loss: torch.Tensor, step: int, batch_idx: int) -> None:
    """Raise ``NonFiniteLossError`` when ``loss`` is NaN or +-inf."""
    if not torch.isfinite(loss).all():
        raise NonFiniteLossError(
            f"training loss became {loss.detach().float().item()} at step {step} (batch {batch_idx})")
