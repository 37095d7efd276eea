"""Rewards in [0, 1] for the MCTS, from an accuracy (higher is better) or a loss (lower is better).

Example:
    >>> Reward(lower=0.5, upper=1.0, power=2)(0.75)
    0.25
    >>> Reward.for_loss(upper=4.0, power=1)(1.0)
    0.75
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from syno_automl.errors import OptionError

__all__ = ["Reward"]


@dataclass(frozen=True)
class Reward:
    """``((clip(v, lower, upper) - lower) / (upper - lower)) ** power`` for an accuracy-like value ``v``.

    For ``kind="loss"`` the value is mirrored: ``((upper - clip(v, lower, upper)) / (upper - lower)) ** power``
    (with ``lower=0`` this is the original's ``((max_loss - loss) / max_loss) ** power``). A failed trial, a
    non-finite value and a pruned trial get the constant ``failed`` / ``pruned`` rewards (low by default).
    ``objective`` picks the value of a multi-objective trial.

    Example:
        >>> Reward(power=1)(0.9), Reward()(float("nan"))
        (0.9, 0.0)
    """

    lower: float = 0.0
    upper: float = 1.0
    power: float = 2.0
    kind: Literal["accuracy", "loss"] = "accuracy"
    failed: float = 0.0
    pruned: float = 0.0
    objective: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("accuracy", "loss"):
            raise OptionError(f"Reward kind must be 'accuracy' or 'loss', got {self.kind!r}")
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)) or self.upper <= self.lower:
            raise OptionError(f"Reward bounds must be finite with lower < upper, got [{self.lower}, {self.upper}]")
        if not (math.isfinite(self.power) and self.power > 0):
            raise OptionError(f"Reward power must be a positive number, got {self.power}")
        for name in ("failed", "pruned"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise OptionError(f"Reward.{name} must be in [0, 1], got {value}")
        if self.objective < 0:
            raise OptionError(f"Reward.objective must be a non-negative index, got {self.objective}")

    @classmethod
    def for_loss(cls, upper: float, lower: float = 0.0, power: float = 2.0, **kw: Any) -> Reward:
        """A reward for a loss to minimize: 1 at ``lower``, 0 at ``upper`` and above."""
        return cls(lower=lower, upper=upper, power=power, kind="loss", **kw)

    @classmethod
    def for_direction(cls, direction: str) -> Reward:
        """The default for a study direction: accuracy in [0, 1] (maximize) or a loss in [0, 10] (minimize)."""
        return cls() if direction == "maximize" else cls.for_loss(upper=10.0)

    def value_of(self, values: Sequence[float]) -> float:
        """The reward of a finished trial's values: the one at ``objective`` (``failed`` when missing)."""
        return self(values[self.objective]) if self.objective < len(values) else self.failed

    def __call__(self, value: float | None) -> float:
        """The reward of a finished trial's objective value (``failed`` when it is missing or not finite)."""
        if value is None or not math.isfinite(value):
            return self.failed
        clipped = min(max(float(value), self.lower), self.upper)
        span = self.upper - self.lower
        fraction = (clipped - self.lower) / span if self.kind == "accuracy" else (self.upper - clipped) / span
        return fraction ** self.power
