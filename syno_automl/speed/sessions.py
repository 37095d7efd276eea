"""The final stage's speed figures: the speed protocol run in ``FINAL_SESSIONS`` sessions, each in a fresh process
(one after another: never two timing at once), and pooled (:func:`syno_automl.speed.pooled.pool_sessions`).

Why more than one process: a new process lays the models out anew and moves a ratio by a few per cent more than
one process's interval holds (ResNet-18 operators: 1.9 % median between two processes, intervals of ±1.8 %); two
sessions let the interval hold that spread, estimated over all finalists and the control together. Each session
runs half the pairs of a single-session measurement (``SESSION_PROTOCOL``), so the timing costs about the same;
the second process's start-up (torch, the space and the models, no data nor Lightning: ~1.7 s on the default
search, `spawn` included) is the price.

The operators' intervals also hold a shift common to every operator between runs (``RUN_DRIFT``, added by
:func:`syno_automl.speed.pooled.with_run_drift`): the sessions of one run share the machine's state of those
minutes, so their spread cannot show it. The control (the original against itself) has no such term: both of its
sides are the same model, and the machine moves them alike.

``--speed-process same`` runs the sessions in the search's own process (each with new copies of the models): for
quick checks and tests; its label says so. Fast timing (:mod:`syno_automl.runtime.timing_rigor`) runs one session,
as pyperf's ``--fast`` runs fewer processes: a rough figure, its interval the session's own and the run drift.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from syno_automl.errors import OptionError
from syno_automl.runtime import SpeedTarget
from syno_automl.runtime.timing_rigor import fast_timing
from syno_automl.speed.paired import SPEED_PROTOCOL, PairedProtocol
from syno_automl.speed.pooled import pool_sessions, with_run_drift
from syno_automl.speed.probe import SpeedMeasurement, measure_speedups
from syno_automl.speed.process import FRESH, FRESH_LABEL, SAME, measure_in_fresh_process
from syno_automl.speed.subject import SpeedSubject

__all__ = ["CUDA_RUN_DRIFT", "FINAL_SESSIONS", "REMEASURE_SESSIONS", "RUN_DRIFT", "SESSION_PROTOCOL",
           "measure_final", "pool_measurements", "run_drift"]

FINAL_SESSIONS = 2
# ``reevaluate``'s: one operator and the control in 3 sessions give the spread 4 degrees of freedom (t = 2.78);
# in 2 they would give it 2 (t = 4.30)
REMEASURE_SESSIONS = 3
# the standard deviation of a shift common to every operator's log ratio between runs minutes apart (its 95 % term
# in an interval: 1.96 * sqrt(2) * 1.2 % = ±3.3 %), measured on this project's 2-core VM with one core kept busy by
# `bench/speed_reliability.py --runs 4`: 1.20 % over 4 runs of 12 ResNet-18 operators (3 degrees of freedom), as
# two runs of them gave before (+1.7 % apart); the default model's 24: 2.16 % at load 3.4, 0.14 % at load 2.
RUN_DRIFT = 0.012
# the same on a CUDA target (±6.7 %), measured on an H200 (docs/measurements/2026-11-27-h200.md, cuda.eager fp32,
# `bench/speed_reliability.py --target cuda.eager --no-load`, 2 runs): ResNet-18's 6 operators all moved alike by
# +4.7 % between the runs (sd 3.35 %), the default model's 8 by -0.9 % (0.63 %); 2.4 % pools the two (2 degrees of
# freedom: a rough figure, kept until more GPU runs refine it). At 1.2 % a run's interval held the other run's
# figure for 9 of 12 ResNet-18 checks; at 2.4 %, 12 of 12 (`bench/speed_reliability.py --from-saved
# docs/measurements/2026-11-27-h200-reliability-cuda.eager-fp32.json --target cuda.eager --drift 0.024`).
CUDA_RUN_DRIFT = 0.024
# one session's share: whole cycles of the 4 copies (8 pairs each), 16 to 24 pairs, a stop at ±2.8 % (the
# single-session ±2 % times √2: the pooled mean of two gets back to about ±2 % before the spread between processes)
SESSION_PROTOCOL = replace(SPEED_PROTOCOL, min_pairs=16, max_pairs=24, target_halfwidth=0.028)


def measure_final(subject: SpeedSubject, ops: list[Any], *, sessions: int = FINAL_SESSIONS,
                  protocol: PairedProtocol = SESSION_PROTOCOL, process: str = FRESH) -> SpeedMeasurement:
    """`ops` and the control against the original on the subject's target, in `sessions` sessions (`process`:
    fresh processes, or this one; one session under fast timing), pooled. Never raises for an operator: one that
    cannot be timed gets None."""
    if sessions < 1:
        raise OptionError(f"sessions must be >= 1, got {sessions}")
    if process not in (FRESH, SAME):
        raise OptionError(f"process must be {FRESH!r} or {SAME!r}, got {process!r}")
    if fast_timing():
        sessions = 1
    runs: list[SpeedMeasurement] = []
    for _ in range(sessions):
        run = (measure_speedups(subject, ops, protocol=protocol) if process == SAME
               else measure_in_fresh_process(subject, ops, protocol=protocol))
        if not run.measured:   # nothing here can time it (no CUDA device): a second session would say the same
            return run
        runs.append(run)
    return pool_measurements(runs, subject.target)


def run_drift(target: SpeedTarget) -> float:
    """The run drift of `target`'s device: ``CUDA_RUN_DRIFT`` on a GPU, ``RUN_DRIFT`` on the CPU."""
    return CUDA_RUN_DRIFT if target.cuda else RUN_DRIFT


def pool_measurements(runs: list[SpeedMeasurement], target: SpeedTarget) -> SpeedMeasurement:
    """The sessions' measurements on `target` as one: the control and the operators pooled together, the operators'
    intervals widened by the run drift of the target's device; the label says how."""
    pooled = pool_sessions([[run.control, *run.estimates] for run in runs])
    control = pooled[0]
    drift = run_drift(target)
    estimates = [None if e is None else with_run_drift(e, drift) for e in pooled[1:]]
    return SpeedMeasurement(_pooled_label(runs), estimates, control,
                            control.baseline_ms if control is not None else runs[0].baseline_ms,
                            runs[0].conditions)


def _pooled_label(runs: list[SpeedMeasurement]) -> str:
    if len(runs) == 1:
        return runs[0].label
    labels = [run.label for run in runs]
    if len(set(labels)) > 1:   # a session fell back to the search's process: each says why
        return f"pooled over {len(runs)} sessions: " + "; ".join(labels)
    label = labels[0]
    if label.endswith(FRESH_LABEL):
        return f"{label[:-len(FRESH_LABEL)]} ({len(runs)} fresh processes, pooled)"
    return f"{label} ({len(runs)} sessions in the search's process, pooled)"
