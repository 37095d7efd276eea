"""The speed protocol: candidates against the baseline, timed in interleaved blocks in one process, each as a
ratio with its 95 % reproducibility interval and the conditions it was taken under.

Every speed figure goes through :func:`paired_speedups` (one candidate: :func:`paired_speedup`):

1. warm-up calls of every model (never timed: for a compiled target this is where it compiles);
2. each model's calls per block calibrated so that one block lasts at least ``min_block_s`` (beats the clock's
   resolution and one call's jitter);
3. blocks in pairs, the order alternating (A B, B A, A B, ...), so that a drift of the machine (load coming and
   going, a clock boost) moves both sides of a ratio alike; the device synchronized around each block
   (``sync`` is ``torch.cuda.synchronize`` on a GPU); each pair gives one log ratio;
4. pairs in batches of ``batch_pairs``; the candidates take turns batch by batch, so that each one's batches
   spread over the whole measurement and meet the same moments of the machine;
5. each model in ``copies`` copies (its weights and inputs at other addresses: the caller makes them), the
   batches going through them in turn: where a model's tensors lie in memory moves its speed (cache sets, page
   and vector alignment), by up to 6 % for one operator measured here, and another process lays them out anew;
6. more whole cycles of the copies until the interval is within ``target_halfwidth`` of the ratio, or
   ``max_pairs`` pairs.

**The interval** is computed from batch means, not single pairs: pairs timed back to back share the machine's
state of that moment and the same copies (they are correlated), which makes an interval over pairs too narrow:
measured here, two processes' figures fell outside each other's pair intervals in half the cases. Batch means are
the standard remedy for a correlated series, and the copies put the memory layout's share of the spread inside
the interval (and average it in the ratio) instead of leaving it to tell two processes apart. It is a
*reproducibility* interval: the mean's 95 % interval (Student's t over the batch means) widened by √2, the range in
which a re-measurement by this protocol on this machine falls 95 % of the time (the difference of two runs carries
both runs' noise; a plain confidence interval of one run holds the other run's figure only ~83 % of the time even
when exact).

The result reads ``1.41× [1.37, 1.45]``: the candidate runs 1.41 times as fast as the baseline, and another
measurement here would give a figure in that range. Two figures whose intervals overlap are a tie; a candidate is
faster only when its whole interval is above 1. A control (the baseline against itself) shows the protocol's own
noise.

The clock and the synchronization are parameters, so that the protocol's logic is tested with a fake clock.

Example (a fake clock: the baseline takes 2 ms a call, the candidate 1 ms):
    >>> now = [0.0]
    >>> def baseline(): now[0] += 0.002
    >>> def candidate(): now[0] += 0.001
    >>> estimate = paired_speedup(baseline, candidate, clock=lambda: now[0])
    >>> estimate.text(), estimate.faster, estimate.pairs
    ('2.00× [2.00, 2.00]', True, 24)
"""
from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Union

from syno_automl.errors import OptionError
from syno_automl.runtime.timing_rigor import fast_timing

__all__ = ["PairedProtocol", "Conditions", "SpeedupEstimate", "paired_speedup", "paired_speedups", "t_quantile",
           "SPEED_PROTOCOL", "TRIAL_SPEED_PROTOCOL"]


@dataclass(frozen=True)
class PairedProtocol:
    """How a ratio is timed (see the module docstring)."""

    warmup: int = 2                  # calls of each side before timing (compilation happens here)
    min_block_s: float = 0.02        # one block lasts at least this long
    min_pairs: int = 24              # pairs of blocks before the stopping rule is asked
    max_pairs: int = 48              # the cap: the interval is what it is then
    target_halfwidth: float = 0.02   # stop once the interval is within ±2 % of the ratio
    batch_pairs: int = 2             # pairs in a row per batch: the interval is over batch means
    copies: int = 4                  # copies of each model (weights and inputs elsewhere in memory) batches cycle

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min_block_s <= 0 or self.batch_pairs < 1 or self.copies < 1:
            raise OptionError(f"a paired protocol needs warmup >= 0, min_block_s > 0, batch_pairs >= 1 and "
                              f"copies >= 1, got {self}")
        if self.min_pairs < 2 * self.batch_pairs or self.max_pairs < self.min_pairs:
            raise OptionError(f"a paired protocol needs 2 batches at least (min_pairs >= 2 * batch_pairs) and "
                              f"min_pairs <= max_pairs, got {self}")
        if not self.target_halfwidth > 0:
            raise OptionError(f"target_halfwidth must be > 0, got {self.target_halfwidth}")

    def fast(self) -> PairedProtocol:
        """This protocol shortened for fast timing (runtime.timing_rigor): one warm-up, 5 ms blocks, two batches of
        pairs (three at most), two copies at most."""
        pairs = 2 * self.batch_pairs
        return replace(self, warmup=min(self.warmup, 1), min_block_s=min(self.min_block_s, 0.005),
                       min_pairs=min(self.min_pairs, pairs),
                       max_pairs=min(self.max_pairs, max(pairs, 3 * self.batch_pairs)), copies=min(self.copies, 2))

    def as_asked(self) -> PairedProtocol:
        """The protocol this process times by: this one, or :meth:`fast` under fast timing."""
        return self.fast() if fast_timing() else self

    @property
    def min_batches(self) -> int:
        return -(-self.min_pairs // self.batch_pairs)

    @property
    def max_batches(self) -> int:
        return max(self.min_batches, self.max_pairs // self.batch_pairs)


SPEED_PROTOCOL = PairedProtocol()
# a search trial's: the same protocol, shorter (<= 15 % of the default search's time): blocks of >= 20 ms as the
# final stage's, but 8 to 20 pairs, 2 copies and a stop at +-4 %; on the default digits model (~10 ms a call on one
# thread) at most ~1.2 s a trial. The final stage measures its finalists afresh with SPEED_PROTOCOL.
TRIAL_SPEED_PROTOCOL = PairedProtocol(warmup=2, min_block_s=0.02, min_pairs=8, max_pairs=20, target_halfwidth=0.04,
                                      copies=2)


@dataclass(frozen=True)
class Conditions:
    """What a speed figure was taken under: it holds there, not necessarily elsewhere."""

    device: str          # "cpu (2 cores)", or the GPU's name
    torch: str
    threads: int
    precision: str       # "fp32", "bf16"
    batch: str           # what was timed: "batch 64", "batch 1 at 224×224"
    load: float | None   # the 1-minute load average when timing started (None: not known here)
    setup: str = ""      # how both sides ran: layout, cudnn.benchmark, compile mode (speed/setup.py); "": not recorded

    def text(self) -> str:
        load = "" if self.load is None else f", load {self.load:.2f}"
        setup = f", {self.setup}" if self.setup else ""
        return (f"{self.device}, torch {self.torch}, {self.threads} thread{'s' if self.threads != 1 else ''}, "
                f"{self.precision}, {self.batch}{setup}{load}")

    @classmethod
    def here(cls, device: str, threads: int, precision: str, batch: str, setup: str = "") -> Conditions:
        import torch

        try:
            load: float | None = os.getloadavg()[0]
        except (AttributeError, OSError):   # not on every platform
            load = None
        if fast_timing():   # a fast figure says so wherever it is shown
            setup = f"{setup}, fast timing" if setup else "fast timing"
        return cls(device, torch.__version__, threads, precision, batch, load, setup)


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


def _interval(logs: list[float], batch: int) -> tuple[float, float]:
    """(mean, half-width) of the log ratio's 95 % reproducibility interval: Student's t over the means of
    consecutive batches of `batch` pairs, widened by √2 (a re-measurement carries its own noise too)."""
    means = [statistics.fmean(logs[i:i + batch]) for i in range(0, len(logs) - batch + 1, batch)]
    mean = statistics.fmean(means)
    half = t_quantile(len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means)) * math.sqrt(2.0)
    return mean, half


Model = Union[Callable[[], Any], Sequence[Callable[[], Any]]]   # one call of a model, or of each of its copies


def _copies(model: Model) -> list[Callable[[], Any]]:
    return list(model) if isinstance(model, Sequence) else [model]


@dataclass
class _Side:
    """One candidate under way: its copies' calls, its calls per block, its blocks' times, its pairs' log ratios."""

    fns: list[Callable[[], Any]]
    number: int = 0
    times: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    logs: list[float] = field(default_factory=list)
    done: bool = False
    failed: bool = False


def _batch(bases: list[Callable[[], Any]], base_number: int, side: _Side, protocol: PairedProtocol,
           clock: Callable[[], float], sync: Callable[[], None]) -> None:
    """`batch_pairs` pairs of `side` against the baseline, each pair's order the other of the one before; the
    batch's copy of each model is the next in turn (batch b: copy b mod copies)."""
    b = len(side.logs) // protocol.batch_pairs
    fns = (bases[b % len(bases)], side.fns[b % len(side.fns)])
    for _ in range(protocol.batch_pairs):
        order = (0, 1) if len(side.logs) % 2 == 0 else (1, 0)   # A B, B A, A B ...
        times = [0.0, 0.0]
        for which in order:
            times[which] = _block(fns[which], base_number if which == 0 else side.number, clock, sync)
            side.times[which].append(times[which])
        side.logs.append(math.log(times[0] / times[1]))
    batches = len(side.logs) // protocol.batch_pairs
    cycle = max(len(bases), len(side.fns))
    if batches >= protocol.min_batches and batches % cycle == 0:   # asked after whole cycles of the copies
        stop = math.log1p(protocol.target_halfwidth)
        side.done = (_interval(side.logs, protocol.batch_pairs)[1] <= stop
                     or batches + cycle > protocol.max_batches)


def _estimate(side: _Side, protocol: PairedProtocol, conditions: Conditions | None) -> SpeedupEstimate | None:
    if side.failed or not side.logs:
        return None
    mean, half = _interval(side.logs, protocol.batch_pairs)
    return SpeedupEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(side.logs),
                           statistics.median(side.times[0]) * 1e3, statistics.median(side.times[1]) * 1e3,
                           conditions)


def _warm(fns: list[Callable[[], Any]], protocol: PairedProtocol, clock: Callable[[], float],
          sync: Callable[[], None]) -> int:
    """Warm-up calls of every copy; the calls per block, calibrated on the first."""
    for fn in fns:
        for _ in range(protocol.warmup):
            fn()
    return _calibrate(fns[0], protocol.min_block_s, clock, sync)


def paired_speedups(baseline: Model, candidates: Sequence[Model], protocol: PairedProtocol = SPEED_PROTOCOL, *,
                    clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] = lambda: None,
                    conditions: Conditions | None = None) -> list[SpeedupEstimate | None]:
    """Times each of `candidates` against `baseline` by the protocol, the candidates taking turns batch by batch.
    A model is one call of it on its inputs, or a list of such calls, one per copy of the model (its weights and
    inputs at other addresses): the batches go through the copies in turn. A candidate that raises gets None and
    the others go on; the baseline raising ends them all (it raises)."""
    protocol = protocol.as_asked()
    bases = _copies(baseline)
    base_number = _warm(bases, protocol, clock, sync)
    sides = [_Side(_copies(model)) for model in candidates]
    for side in sides:
        try:
            side.number = _warm(side.fns, protocol, clock, sync)
        except Exception:  # noqa: BLE001 -- a candidate that cannot run is unmeasured, the others still count
            side.failed = side.done = True
    turn = 0
    while not all(side.done for side in sides):
        waiting = [side for side in sides if not side.done]
        for side in waiting[turn % len(waiting):] + waiting[:turn % len(waiting)]:   # who goes first rotates
            _run_batch(bases, base_number, side, protocol, clock, sync)
        turn += 1
    return [_estimate(side, protocol, conditions) for side in sides]


def _run_batch(bases: list[Callable[[], Any]], base_number: int, side: _Side, protocol: PairedProtocol,
               clock: Callable[[], float], sync: Callable[[], None]) -> None:
    """One batch of `side`; a candidate that raises is marked failed (the baseline's own error propagates: it is
    checked by running it alone)."""
    try:
        _batch(bases, base_number, side, protocol, clock, sync)
    except Exception:  # noqa: BLE001 -- the candidate's, unless the baseline fails alone too
        for fn in bases:
            fn()   # the baseline's own failure ends them all: it raises here
        side.failed = side.done = True


def paired_speedup(baseline: Model, candidate: Model, protocol: PairedProtocol = SPEED_PROTOCOL, *,
                   clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] = lambda: None,
                   conditions: Conditions | None = None) -> SpeedupEstimate:
    """Times `candidate` against `baseline` by the protocol (a model: as :func:`paired_speedups`); raises what
    either raises."""
    protocol = protocol.as_asked()
    bases = _copies(baseline)
    base_number = _warm(bases, protocol, clock, sync)
    fns = _copies(candidate)
    side = _Side(fns, _warm(fns, protocol, clock, sync))
    while not side.done:
        _batch(bases, base_number, side, protocol, clock, sync)
    estimate = _estimate(side, protocol, conditions)
    assert estimate is not None
    return estimate
