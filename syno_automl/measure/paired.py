"""The speed protocol: one candidate against the baseline, timed in interleaved blocks in one process, as a ratio
with its 95 % interval and the conditions it was taken under.

Every speed figure of the final stage goes through :func:`paired_speedup`:

1. warm-up calls of both (never timed: for a compiled target this is where it compiles);
2. each side's calls per block calibrated so that one block lasts at least ``min_block_s`` (beats the clock's
   resolution and one call's jitter);
3. blocks in pairs, the order alternating (A B, B A, A B, ...), so that a drift of the machine (load coming and
   going, a clock boost) moves both sides of a ratio alike; the device synchronized around each block (CUDA
   events' worth: ``sync`` is ``torch.cuda.synchronize`` on a GPU);
4. each pair gives one log ratio; more pairs until the 95 % interval of their mean (Student's t) is within
   ``target_halfwidth`` of it, or ``max_pairs`` pairs were timed.

The result reads ``1.41× [1.37, 1.45]``: the candidate runs 1.41 times as fast as the baseline, and the interval
is where the true ratio lies with 95 % confidence *under these conditions*. Two figures whose intervals overlap
are a tie; a candidate is faster only when its whole interval is above 1. A control (the baseline against itself)
shows the protocol's own noise.

The clock and the synchronization are parameters, so that the protocol's logic is tested with a fake clock.

Example (a fake clock: the baseline takes 2 ms a call, the candidate 1 ms):
    >>> now = [0.0]
    >>> def baseline(): now[0] += 0.002
    >>> def candidate(): now[0] += 0.001
    >>> estimate = paired_speedup(baseline, candidate, clock=lambda: now[0])
    >>> estimate.text(), estimate.faster, estimate.pairs
    ('2.00× [2.00, 2.00]', True, 6)
"""
from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from syno_automl.errors import OptionError

__all__ = ["PairedProtocol", "Conditions", "SpeedupEstimate", "paired_speedup", "t_quantile", "SPEED_PROTOCOL",
           "TRIAL_SPEED_PROTOCOL"]


@dataclass(frozen=True)
class PairedProtocol:
    """How a ratio is timed (see the module docstring)."""

    warmup: int = 2                  # calls of each side before timing (compilation happens here)
    min_block_s: float = 0.02        # one block lasts at least this long
    min_pairs: int = 6               # pairs of blocks before the stopping rule is asked
    max_pairs: int = 40              # the cap: the interval is what it is then
    target_halfwidth: float = 0.015  # stop once the 95 % interval is within ±1.5 % of the ratio

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min_block_s <= 0 or self.min_pairs < 2 or self.max_pairs < self.min_pairs:
            raise OptionError(f"a paired protocol needs warmup >= 0, min_block_s > 0 and 2 <= min_pairs <= "
                              f"max_pairs, got {self}")
        if not self.target_halfwidth > 0:
            raise OptionError(f"target_halfwidth must be > 0, got {self.target_halfwidth}")


SPEED_PROTOCOL = PairedProtocol()
# a search trial's: the same protocol, shorter (<= 15 % of the default search's time): blocks of >= 20 ms as the
# final stage's, but 6 to 20 pairs and a stop at +-3 %; on the default digits model (~10 ms a call on one thread)
# at most ~1.2 s a trial. The final stage still measures its finalists afresh with SPEED_PROTOCOL.
TRIAL_SPEED_PROTOCOL = PairedProtocol(warmup=2, min_block_s=0.02, min_pairs=6, max_pairs=20, target_halfwidth=0.03)


@dataclass(frozen=True)
class Conditions:
    """What a speed figure was taken under: it holds there, not necessarily elsewhere."""

    device: str          # "cpu (2 cores)", or the GPU's name
    torch: str
    threads: int
    precision: str       # "fp32", "bf16"
    batch: str           # what was timed: "batch 64", "batch 64 × 64 tokens"
    load: float | None   # the 1-minute load average when timing started (None: not known here)

    def text(self) -> str:
        load = "" if self.load is None else f", load {self.load:.2f}"
        return (f"{self.device}, torch {self.torch}, {self.threads} thread{'s' if self.threads != 1 else ''}, "
                f"{self.precision}, {self.batch}{load}")

    @classmethod
    def here(cls, device: str, threads: int, precision: str, batch: str) -> Conditions:
        import torch

        try:
            load: float | None = os.getloadavg()[0]
        except (AttributeError, OSError):   # not on every platform
            load = None
        return cls(device, torch.__version__, threads, precision, batch, load)


@dataclass(frozen=True)
class SpeedupEstimate:
    """Baseline time / candidate time (> 1: the candidate is faster) with its 95 % interval."""

    ratio: float
    low: float
    high: float
    pairs: int
    baseline_ms: float     # the median per-call time of each side's blocks
    candidate_ms: float
    conditions: Conditions | None = None

    @property
    def faster(self) -> bool:
        """Measurably faster: the whole interval is above 1."""
        return self.low > 1.0

    @property
    def slower(self) -> bool:
        return self.high < 1.0

    def overlaps(self, other: SpeedupEstimate) -> bool:
        """Whether the two intervals share a value: the two figures are a tie."""
        return self.low <= other.high and other.low <= self.high

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self) -> str:
        """``1.41× [1.37, 1.45]``."""
        return f"{self.ratio:.2f}× [{self.low:.2f}, {self.high:.2f}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeedupEstimate:
        conditions = data.get("conditions")
        return cls(float(data["ratio"]), float(data["low"]), float(data["high"]), int(data["pairs"]),
                   float(data["baseline_ms"]), float(data["candidate_ms"]),
                   Conditions(**conditions) if isinstance(conditions, Mapping) else None)


# Student's t, two-sided 95 %, by degrees of freedom (1..30); the normal's 1.96 beyond
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with `df` degrees of freedom."""
    if df < 1:
        raise OptionError(f"degrees of freedom must be >= 1, got {df}")
    return _T95[df - 1] if df <= len(_T95) else 1.96


def _calibrate(fn: Callable[[], Any], min_block_s: float, clock: Callable[[], float], sync: Callable[[], None]) -> int:
    """Calls per block so that one block lasts at least `min_block_s` (doubling, as timeit's autorange)."""
    number = 1
    while True:
        sync()
        start = clock()
        for _ in range(number):
            fn()
        sync()
        if clock() - start >= min_block_s or number >= 1 << 20:
            return number
        number *= 2


def _block(fn: Callable[[], Any], number: int, clock: Callable[[], float], sync: Callable[[], None]) -> float:
    """Seconds per call over one block of `number` calls."""
    sync()
    start = clock()
    for _ in range(number):
        fn()
    sync()
    return max(clock() - start, 1e-12) / number


def _interval(logs: list[float]) -> tuple[float, float]:
    """(mean, half-width) of the 95 % interval of the mean of `logs`."""
    mean = statistics.fmean(logs)
    half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return mean, half


def paired_speedup(baseline: Callable[[], Any], candidate: Callable[[], Any],
                   protocol: PairedProtocol = SPEED_PROTOCOL, *, clock: Callable[[], float] = time.perf_counter,
                   sync: Callable[[], None] = lambda: None, conditions: Conditions | None = None) -> SpeedupEstimate:
    """Times `candidate` against `baseline` (each a call of the model on its inputs) by the protocol."""
    for _ in range(protocol.warmup):
        baseline()
        candidate()
    numbers = (_calibrate(baseline, protocol.min_block_s, clock, sync),
               _calibrate(candidate, protocol.min_block_s, clock, sync))
    sides: tuple[list[float], list[float]] = ([], [])
    logs: list[float] = []
    stop = math.log1p(protocol.target_halfwidth)
    while len(logs) < protocol.max_pairs:
        order = (0, 1) if len(logs) % 2 == 0 else (1, 0)   # A B, B A, A B ...
        times = [0.0, 0.0]
        for side in order:
            times[side] = _block((baseline, candidate)[side], numbers[side], clock, sync)
            sides[side].append(times[side])
        logs.append(math.log(times[0] / times[1]))
        if len(logs) >= protocol.min_pairs and _interval(logs)[1] <= stop:
            break
    mean, half = _interval(logs)
    return SpeedupEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs),
                           statistics.median(sides[0]) * 1e3, statistics.median(sides[1]) * 1e3, conditions)
