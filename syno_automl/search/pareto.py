"""The MCTS reward of a pareto search: accuracy credited only at a speedup over the original.

``reward = accuracy_reward(value) * speed_credit(ratio)``, where ``ratio`` is the trial's second objective, its
speed ratio (lower is faster): the measured time ratio (``time_ratio``: the original model's speed over the
substituted one's, 1 / its measured speedup; ``--speed-objective measured``, the default) or the planned cost
ratio against the replaced layers (``cost_ratio``; ``--speed-objective planned``). ``speed_credit`` rises (in
log speedup) from 0 at ratio 1.0 (no faster than the original) to 1 at ``1 / speedup`` and below. An operator
worse than the baseline on both axes (less accurate, not faster) gets 0.

Why this and not a hypervolume contribution against the baseline's point (accuracy_baseline, 1.0): a
hypervolume contribution depends on the other trials (the front moves as trials finish) and on the baseline's
accuracy (known only once the baseline trial ends), so a trial's reward would change after it was observed. The
MCTS keeps fixed-point sums of immutable observations, cached incrementally and rebuilt identically in every
worker; a reward that is a function of the trial's recorded values alone keeps that property. A measured ratio is
recorded once per trial (and reused from the study's measurement store), so it is as immutable as the accuracy,
but it depends on the machine and its load: only the planned cost ratio, the cost model's deterministic
prediction, makes the decisions load-independent (tests/study/test_search_determinism.py runs with it).

Example:
    >>> from syno_automl.search.reward import Reward
    >>> r = ParetoReward(Reward(power=1), speedup=2.0)
    >>> r.value_of([0.9, 1.0]), r.value_of([0.9, 0.5]), round(r.value_of([0.9, 0.75]), 3)
    (0.0, 0.9, 0.374)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from syno_automl.errors import OptionError, OptionTypeError
from syno_automl.search.reward import Reward

__all__ = ["ParetoReward", "speed_credit"]


def speed_credit(ratio: float, speedup: float) -> float:
    """0 at a speed ratio (time or cost over the original's) >= 1, 1 at ratio <= 1 / speedup, linear in
    log(1 / ratio) between.

    Example:
        >>> speed_credit(1.0, 2.0), speed_credit(0.25, 2.0), round(speed_credit(2 ** -0.5, 2.0), 6)
        (0.0, 1.0, 0.5)
    """
    if not (ratio > 0 and math.isfinite(ratio)):
        return 0.0
    return min(max(math.log(1.0 / ratio) / math.log(speedup), 0.0), 1.0)


@dataclass(frozen=True)
class ParetoReward:
    """A reward in [0, 1] from a pareto trial's values ``(accuracy or loss, speed ratio)``.

    ``accuracy`` maps the first value to [0, 1] (a Reward for accuracy, or one for a loss); ``speedup`` (> 1)
    is where accuracy earns its full reward. ``cost_index`` is the speed ratio's position among the values (the
    measured time ratio or the planned cost ratio, whichever the study optimizes). Failed and pruned trials get
    ``accuracy``'s constants.
    """

    accuracy: Reward
    speedup: float = 2.0
    value_index: int = 0
    cost_index: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.accuracy, Reward):
            raise OptionTypeError(f"ParetoReward.accuracy must be a Reward, got {type(self.accuracy).__name__}")
        if not (self.speedup > 1 and math.isfinite(self.speedup)):
            raise OptionError(f"ParetoReward.speedup must be a number > 1, got {self.speedup}")

    @property
    def failed(self) -> float:
        return self.accuracy.failed

    @property
    def pruned(self) -> float:
        return self.accuracy.pruned

    def __call__(self, value: float | None, ratio: float | None) -> float:
        if value is None or ratio is None or not math.isfinite(value):
            return self.failed
        return self.accuracy(value) * speed_credit(float(ratio), self.speedup)

    def value_of(self, values: Sequence[float]) -> float:
        """The reward of a finished trial's values (``failed`` when one is missing)."""
        if max(self.value_index, self.cost_index) >= len(values):
            return self.failed
        return self(values[self.value_index], values[self.cost_index])
