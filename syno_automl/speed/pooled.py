"""Speed figures from several measurement sessions (fresh processes) pooled into one, with an interval that holds
what changes from one process to the next.

One session of the speed protocol (:mod:`syno_automl.speed.paired`) gives each candidate an interval from its
own batches: it holds the noise of that process. A new process lays the models out anew (addresses, the
allocator's arenas, oneDNN's primitive choices) and moves a ratio by a few per cent more than that: measured on
ResNet-18 operators, two processes' figures differed by a median 1.9 % while each one's interval was ±1.8 %, so
each held the other's figure in only 42 % of cases. That share cannot be seen from inside one process.

Pooling: each candidate's figure is the geometric mean of its sessions' ratios. The spread between sessions is
estimated from all candidates at once (the control included): with ``m`` candidates measured in ``S`` sessions,
the pooled variance of one session's log ratio has ``m (S - 1)`` degrees of freedom, where one candidate's two
figures alone would have one. The interval is a reproducibility interval, as a session's: the range in which the
same pooled measurement, made again, falls 95 % of the time, so its half-width is Student's t times the standard
deviation of the difference of two such means (``s * sqrt(2 / S)``), and never narrower than the candidate's own
sessions say (a candidate noisier than the others keeps its own, wider interval).

**A shift common to every candidate between runs** (the machine's state minutes later: on a VM on a shared host
the memory system and the clock do not stay put) moves every operator's ratio alike and no run sees it from
inside: its sessions share it. :func:`with_run_drift` adds it to an interval as a stated term (the standard
deviation ``drift`` of that shift in log ratio, measured by ``bench/speed_reliability.py --runs``), in quadrature:
the difference of two runs carries two such shifts, so the term's 95 % half-width is ``1.96 * sqrt(2) * drift``.

Example (two sessions, two candidates; the second session 2 % slower for the first candidate):
    >>> from syno_automl.speed.paired import SpeedupEstimate
    >>> a = [SpeedupEstimate(1.50, 1.48, 1.52, 16, 10.0, 6.7), SpeedupEstimate(1.00, 0.99, 1.01, 16, 10.0, 10.0)]
    >>> b = [SpeedupEstimate(1.47, 1.45, 1.49, 16, 10.0, 6.8), SpeedupEstimate(1.00, 0.99, 1.01, 16, 10.0, 10.0)]
    >>> [e.text() for e in pool_sessions([a, b])]
    ['1.48× [1.42, 1.55]', '1.00× [0.96, 1.04]']
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from syno_automl.errors import OptionError
from syno_automl.speed.paired import SpeedupEstimate, t_quantile

__all__ = ["drift_halfwidth", "pool_sessions", "with_run_drift"]


def pool_sessions(sessions: Sequence[Sequence[SpeedupEstimate | None]]) -> list[SpeedupEstimate | None]:
    """One estimate per candidate from the sessions' (each a list over the same candidates; None: not measured in
    that session). A candidate measured in one session keeps that session's estimate; in none, None."""
    if not sessions:
        raise OptionError("pooling needs one session at least")
    count = len(sessions[0])
    if any(len(s) != count for s in sessions):
        raise OptionError(f"every session must measure the same candidates, got {[len(s) for s in sessions]}")
    per_candidate = [[e for e in (s[i] for s in sessions) if e is not None] for i in range(count)]
    spread, df = _between_sessions(per_candidate)
    return [_pooled(found, spread, df) for found in per_candidate]


def _between_sessions(per_candidate: list[list[SpeedupEstimate]]) -> tuple[float, int]:
    """(variance of one session's log ratio about its candidate's mean, its degrees of freedom), pooled over the
    candidates measured more than once."""
    squares, df = 0.0, 0
    for found in per_candidate:
        if len(found) < 2:
            continue
        logs = [math.log(e.ratio) for e in found]
        mean = statistics.fmean(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
    return (squares / df if df else 0.0), df


def _pooled(found: list[SpeedupEstimate], spread: float, df: int) -> SpeedupEstimate | None:
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    sessions = len(found)
    mean = statistics.fmean(math.log(e.ratio) for e in found)
    # each session's own reproducibility half-width (log), combined for the mean of `sessions` of them
    own = math.sqrt(statistics.fmean(((math.log(e.high) - math.log(e.low)) / 2) ** 2 for e in found) / sessions)
    between = t_quantile(df) * math.sqrt(spread * 2.0 / sessions) if df else 0.0
    half = max(own, between)
    first = found[0]
    return SpeedupEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half),
                           sum(e.pairs for e in found), statistics.median(e.baseline_ms for e in found),
                           statistics.median(e.candidate_ms for e in found), first.conditions)


def drift_halfwidth(drift: float) -> float:
    """The 95 % half-width (log ratio) that a run drift of standard deviation `drift` adds in quadrature: the
    difference of two runs carries two such shifts, so 1.96 * sqrt(2) * drift."""
    if not drift >= 0:
        raise OptionError(f"a run drift is a standard deviation (>= 0), got {drift}")
    return 1.96 * math.sqrt(2.0) * drift


def with_run_drift(estimate: SpeedupEstimate, drift: float) -> SpeedupEstimate:
    """`estimate` with its interval widened by a shift common to all candidates between runs, of standard deviation
    `drift` (log ratio): the half-widths (log) add in quadrature, the figure stays.

    >>> with_run_drift(SpeedupEstimate(1.5, 1.5 / math.exp(0.02), 1.5 * math.exp(0.02), 16, 10.0, 6.7), 0.01).text()
    '1.50× [1.45, 1.55]'
    """
    # the interval is symmetric in log ratio by construction; its wider side is kept should one not be
    half = max(math.log(estimate.ratio / estimate.low), math.log(estimate.high / estimate.ratio))
    widened = math.hypot(half, drift_halfwidth(drift))
    return replace(estimate, low=estimate.ratio * math.exp(-widened), high=estimate.ratio * math.exp(widened))
