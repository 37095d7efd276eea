"""A search trial's measured speed, and the pareto speed objective it feeds (``--speed-objective``).

``measured`` (the default): before its training (so pruned and failed trials have it too) each trial times the
whole model with its operator substituted against the original, on the study's speed target, by the speed
protocol kept short (:data:`~syno_automl.speed.paired.TRIAL_SPEED_PROTOCOL`); the baseline trial times the
control (the original against itself). The figure comes from the study's measurement store when a measurement
with the same key is there (another worker's, or before a ``--resume``), else it is measured and stored
(speed/store.py). It is recorded on the trial (``syno.speedup.<target>`` with ``.low`` / ``.high``, and
``syno.speed``: the estimate, its conditions, the store key) and its MLflow run (``speedup.<target>`` with
``.low`` / ``.high``, tags ``syno.speed.*``), and a pareto study's second value is the time ratio
``1 / speedup`` (the baseline's: 1.0). ``planned``: no timing; the second value is the planned cost ratio, a
deterministic prediction, so the same seed gives the same search whatever the machine's load. A new study whose
target this machine cannot run falls back to planned and says so in one line. The study records which it uses
(user attr ``syno.speed_objective``); a resumed study keeps its own, one recorded before this existed is planned.
The planned cost stays the space's budget and the pruning bound either way.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import optuna

from syno_automl import vocabulary as V
from syno_automl.errors import TrialResultError
from syno_automl.optuna_private import set_user_attrs
from syno_automl.runtime import parse_target
from syno_automl.runtime.device import why_not_runnable
from syno_automl.runtime.timing_signal import timing_in_progress
from syno_automl.settings import SettingError
from syno_automl.speed.paired import TRIAL_SPEED_PROTOCOL, PairedProtocol, SpeedupEstimate
from syno_automl.speed.store import Measurement, MeasurementKey, MeasurementStore, cpu_name, sizes_of

if TYPE_CHECKING:
    from syno_automl.config import SearchConfig
    from syno_automl.study.context import SearchContext

__all__ = ["MEASURED", "PLANNED", "SpeedObjective", "choose_speed_objective", "record_speed_objective",
           "speed_objective_of", "announce_speed_objective", "TrialSpeed", "log_measurement"]

MEASURED, PLANNED = "measured", "planned"


@dataclass(frozen=True)
class SpeedObjective:
    """Which speed a study's trials are judged by: measured on `target`, or planned (`reason`: why planned where
    measured was asked)."""

    kind: str
    target: str
    reason: str | None = None

    @property
    def measured(self) -> bool:
        return self.kind == MEASURED

    def note(self) -> str | None:
        """The one line said when measured was asked and planned is used."""
        if self.reason is None:
            return None
        return (f"syno-automl: speed objective: the planned cost ratio (predicted), not measured: {self.reason}; "
                f"the pareto front and the MCTS reward use the plan")

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.kind, "target": self.target, "reason": self.reason}


def cannot_run(target: str) -> str | None:
    """Why this machine cannot time `target` ("--target cuda.eager: torch ... sees no CUDA device here"), or None
    when it can."""
    why = why_not_runnable(parse_target(target))
    return f"--target {target}: {why}" if why else None


def choose_speed_objective(config: SearchConfig, context: SearchContext) -> SpeedObjective:
    """A new study's: ``--speed-objective``; measured falls back to planned where the target cannot run here."""
    target = context.resolved.speed.name
    if config.speed_objective == PLANNED:
        return SpeedObjective(PLANNED, target)
    why = cannot_run(target)
    return SpeedObjective(PLANNED, target, why) if why else SpeedObjective(MEASURED, target)


def record_speed_objective(study: optuna.Study, speed: SpeedObjective) -> None:
    study.set_user_attr(V.SPEED_OBJECTIVE, speed.to_dict())


def speed_objective_of(study: optuna.Study) -> SpeedObjective:
    """The study's recorded speed objective; planned for a study recorded before it existed."""
    found = study.user_attrs.get(V.SPEED_OBJECTIVE)
    if isinstance(found, dict) and found.get("objective") in (MEASURED, PLANNED):
        return SpeedObjective(found["objective"], str(found.get("target")), found.get("reason"))
    settings = study.user_attrs.get(V.SETTINGS)
    target = settings.get("speed_target") if isinstance(settings, dict) else None
    return SpeedObjective(PLANNED, str(target or "cpu.eager"))


def announce_speed_objective(study: optuna.Study, out: TextIO | None) -> SpeedObjective:
    """The study's speed objective, its fallback line printed; SettingError when the study measures on a target
    this machine cannot run (a --resume elsewhere: its trials would mix planned and measured ratios)."""
    speed = speed_objective_of(study)
    why = cannot_run(speed.target) if speed.measured else None
    if why:
        raise SettingError(f"study {study.study_name!r} measures its speed objective on {speed.target}, which this "
                           f"machine cannot run ({why}); resume it where {speed.target} runs")
    if speed.note() is not None and out is not None:
        print(speed.note(), file=out, flush=True)
    return speed


Measure = Callable[[Any], "SpeedupEstimate | None"]


class TrialSpeed:
    """Each trial's speed on the study's objective target, from the study's store or measured; the objective's
    second value. `measure` (default: a SpeedProbe's, the operator or None for the control) is a parameter so that
    tests count the measurements taken."""

    def __init__(self, context: SearchContext, objective: SpeedObjective, measure: Measure | None = None,
                 protocol: PairedProtocol = TRIAL_SPEED_PROTOCOL) -> None:
        self.context = context
        self.objective = objective
        self.protocol = protocol
        self._measure = measure
        self._probe: Any = None
        self.last: Measurement | None = None   # the latest trial's, until its run logs it (log_last)

    @property
    def probe(self) -> Any:
        if self._probe is None:
            from syno_automl.speed.probe import SpeedProbe

            subject = self.context.speed_subject(parse_target(self.objective.target))
            self._probe = SpeedProbe(subject, protocol=self.protocol)
        return self._probe

    def key(self, op: Any) -> MeasurementKey:
        """The store key of `op`'s measurement here (None: the control's)."""
        import torch

        probe = self.probe
        device = f"{probe.where}, {cpu_name()}" if probe.target.device == "cpu" else probe.where
        return MeasurementKey(op.hash if op is not None else "baseline",
                              sizes_of(probe.example.shape, probe.subject.substitution.space.mappings),
                              probe.target.name, probe.precision, device, torch.__version__)

    def measure(self, trial: optuna.trial.Trial, run: Any | None, op: Any) -> SpeedupEstimate | None:
        """The trial's speedup (None where planned, or it could not be timed: the reason recorded), recorded."""
        self.last = None
        if not self.objective.measured:
            return None
        store, key = MeasurementStore(trial.study), self.key(op)
        found = store.get(key)
        if found is None:
            estimate = self._measure_fn()(op)
            if estimate is None:
                reason = f"{key.operator} could not be built or run on {key.target} for timing"
                trial.set_user_attr(V.SPEED_FAILURE, reason)
                return None
            found = Measurement(key, estimate, trial.number)
            store.put(found)
        _record(trial, run, found)
        self.last = found
        return found.estimate

    def log_last(self, run: Any) -> None:
        """The latest trial's measurement on its MLflow run (once)."""
        if self.last is not None:
            log_measurement(run, self.last)
            self.last = None

    def remeasure(self, study: optuna.Study, run: Any | None, op: Any) -> SpeedupEstimate | None:
        """`op` (None: the control) measured afresh, whatever the store holds (``reevaluate``); the store and `run`
        get the new figure."""
        estimate = self._measure_fn()(op)
        if estimate is None:
            return None
        found = Measurement(self.key(op), estimate)
        MeasurementStore(study).put(found)
        if run is not None:
            log_measurement(run, found)
        return found.estimate

    def _measure_fn(self) -> Measure:
        measure = self._measure or (lambda o: self.probe.control() if o is None else self.probe.measure(o))

        def quietly(op: Any) -> SpeedupEstimate | None:
            with timing_in_progress():   # the sampler's prefetch holds its rollouts while the models are timed
                return measure(op)
        return quietly

    def objective_value(self, trial: optuna.trial.Trial, baseline: bool) -> float:
        """The pareto study's second value: the time ratio 1 / speedup (measured) or the planned cost ratio; 1.0
        for the baseline. TrialResultError when it is missing or not finite (the trial is not comparable)."""
        if baseline:
            return 1.0
        if self.objective.measured:
            speedup = trial.user_attrs.get(V.speedup_attr(self.objective.target))
            if not isinstance(speedup, (int, float)) or not speedup > 0:
                why = trial.user_attrs.get(V.SPEED_FAILURE, "not measured")
                raise TrialResultError(f"no measured speedup on {self.objective.target} ({why}): not comparable")
            return 1.0 / float(speedup)
        cost = trial.user_attrs.get(V.COST_RATIO)
        if cost is None or not math.isfinite(float(cost)):
            raise TrialResultError(f"no finite planned cost ratio ({V.COST_RATIO}={cost}): not comparable")
        return float(cost)

    def text(self, trial: optuna.trial.Trial | optuna.trial.FrozenTrial) -> str:
        """``  speedup 1.41× [1.33, 1.49] on cpu.eager`` for the progress line ('' when not measured)."""
        attrs, target = trial.user_attrs, self.objective.target
        ratio, low, high = (attrs.get(V.speedup_attr(target, b)) for b in ("", "low", "high"))
        if not self.objective.measured or ratio is None or low is None or high is None:
            return ""
        return f"  speedup {ratio:.2f}× [{low:.2f}, {high:.2f}] on {target}"


def _record(trial: optuna.trial.Trial, run: Any | None, found: Measurement) -> None:
    """The measurement on the trial (user attrs) and its MLflow run."""
    estimate, key = found.estimate, found.key
    set_user_attrs(trial, {**{V.speedup_attr(key.target, bound): value for bound, value in _figures(estimate).items()},
                           V.SPEED: {"target": key.target, **estimate.to_dict(), "key": key.digest(),
                                     "measured_in_trial": found.trial}})
    if run is not None:
        log_measurement(run, found)


def _figures(estimate: SpeedupEstimate) -> dict[str, float]:
    return {"": estimate.ratio, "low": estimate.low, "high": estimate.high}


def log_measurement(run: Any, found: Measurement) -> None:
    """``speedup.<target>`` with ``.low`` / ``.high`` (metrics) and the conditions and store key (tags
    ``syno.speed.*``) on an MLflow run."""
    estimate, key = found.estimate, found.key
    run.log_metrics({V.speedup_metric(key.target, bound): value for bound, value in _figures(estimate).items()})
    conditions = estimate.conditions
    params: dict[str, Any] = {"target": key.target, "key": key.digest(), "pairs": estimate.pairs,
                              "measured_in_trial": found.trial}
    if conditions is not None:
        params.update(device=conditions.device, torch=conditions.torch, threads=conditions.threads,
                      precision=conditions.precision, batch=conditions.batch, load=conditions.load)
    run.set_tags({V.TAG_SPEED + name: str(value) for name, value in params.items()})
