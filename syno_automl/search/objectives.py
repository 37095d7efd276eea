"""What a study's trials are worth, read the same way for both kinds of search study.

An ``accuracy`` study is single-objective (val_acc maximized, or val_loss minimized for the lm task); a
``pareto`` study has a second objective, a speed ratio (minimized, lower is faster): ``time_ratio``, the measured
time of the model with the operator over the original's on the study's speed target (1 / the measured speedup:
``--speed-objective measured``), or ``cost_ratio``, the operator's planned cost ratio (``planned``, and studies
made before the measured one existed). Every reader of trial
values (the CLI, reports, MLflow summaries, lookups) goes through these helpers instead of ``trial.value``,
``study.direction`` or ``study.best_trial``, which Optuna refuses on a multi-objective study.

In a pareto study ``study.best_trials`` is the operators' Pareto front: the baseline reports (its accuracy, 1.0)
but is infeasible (constraint ``syno.baseline``), so it never appears there; `best_operator_trial` is the most
accurate operator of that front.

Example:
    >>> import optuna
    >>> study = optuna.create_study(directions=["maximize", "minimize"])
    >>> study.add_trial(optuna.trial.create_trial(values=[0.9, 0.5]))
    >>> study.add_trial(optuna.trial.create_trial(values=[0.8, 0.7]))
    >>> objective_names(study), best_operator_trial(study).number
    (['val_acc', 'cost_ratio'], 0)
"""
from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from syno_automl import vocabulary as V

__all__ = ["is_pareto", "objective_names", "objective_name", "primary_value", "cost_of", "baseline_trial",
           "operator_front", "best_operator_trial", "maximizes", "speed_objective_names", "speed_ratio_name",
           "speed_ratio_label", "speed_ratio_of", "TIME_RATIO", "COST_RATIO"]

TIME_RATIO = "time_ratio"   # the pareto speed objective measured: model time over the original's (1 / speedup)
COST_RATIO = "cost_ratio"   # the planned one: the operator's planned cost over the replaced layers'
_LABELS = {TIME_RATIO: "measured time ratio", COST_RATIO: "planned cost ratio"}

_COMPLETE = (TrialState.COMPLETE,)


def is_pareto(study: optuna.Study) -> bool:
    """Whether the study is multi-objective (accuracy or loss, and cost ratio)."""
    return len(study.directions) > 1


def maximizes(study: optuna.Study) -> bool:
    """Whether the primary objective is maximized (val_acc) rather than minimized (val_loss)."""
    return study.directions[0] == StudyDirection.MAXIMIZE


def objective_names(study: optuna.Study) -> list[str]:
    """One name per objective: ``val_acc`` / ``val_loss``, then (pareto) ``time_ratio`` (measured) or
    ``cost_ratio`` (planned; a study without metric names)."""
    names = study.metric_names
    if names is not None and len(names) == len(study.directions):
        return list(names)
    first = "val_acc" if maximizes(study) else "val_loss"
    return [first] + [COST_RATIO] * (len(study.directions) - 1)


def speed_objective_names(primary: str, pareto: bool, measured: bool) -> list[str]:
    """The metric names a new study gets: the primary objective, then (pareto) its speed ratio's name.

    Example:
        >>> speed_objective_names("val_acc", True, True), speed_objective_names("val_loss", False, True)
        (['val_acc', 'time_ratio'], ['val_loss'])
    """
    return [primary] + ([TIME_RATIO if measured else COST_RATIO] if pareto else [])


def speed_ratio_name(study: optuna.Study) -> str | None:
    """The pareto study's second objective (``time_ratio`` or ``cost_ratio``); None for one objective."""
    return objective_names(study)[1] if is_pareto(study) else None


def speed_ratio_label(study: optuna.Study) -> str:
    """How a heading names the second objective: ``measured time ratio`` or ``planned cost ratio``."""
    name = speed_ratio_name(study)
    return _LABELS.get(name or "", name or "")


def objective_name(study: optuna.Study) -> str:
    """The primary objective: ``val_acc`` for a maximized study (image task), ``val_loss`` (lm task)."""
    return objective_names(study)[0]


def primary_value(trial: FrozenTrial) -> float | None:
    """The trial's accuracy (or loss): its value, or the first of its values; None when it has none."""
    values: Sequence[float] | None = trial.values
    return float(values[0]) if values else None


def cost_of(trial: FrozenTrial) -> float | None:
    """The trial's planned cost ratio: its user attr ``syno.cost_ratio``, else (a trial made by hand) its second
    value; None when unknown. The baseline's is that of the layers it keeps, 1.0. (In a measured study the second
    value is the measured time ratio, not this.)"""
    if trial.user_attrs.get(V.BASELINE):
        return 1.0
    cost = trial.user_attrs.get(V.COST_RATIO)
    if cost is not None:
        return float(cost)
    if trial.values is not None and len(trial.values) > 1:
        return float(trial.values[1])
    return None


def speed_ratio_of(study: optuna.Study, trial: FrozenTrial) -> float | None:
    """The ratio the study's front is drawn against: a pareto study's second value (the measured time ratio, or
    the planned cost ratio: the baseline's 1.0), else the planned cost ratio (:func:`cost_of`)."""
    if is_pareto(study) and trial.values is not None and len(trial.values) > 1:
        return float(trial.values[1])
    return cost_of(trial)


def baseline_trial(study: optuna.Study) -> FrozenTrial | None:
    """The completed trial that trained the original layers."""
    return next((t for t in study.get_trials(deepcopy=False, states=_COMPLETE) if t.user_attrs.get(V.BASELINE)),
                None)


def _operators(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False, states=_COMPLETE)
            if not t.user_attrs.get(V.BASELINE) and primary_value(t) is not None]


def operator_front(study: optuna.Study) -> list[FrozenTrial]:
    """The operators no other operator beats on both accuracy and cost, by increasing cost: ``study.best_trials``
    of a pareto study; in an accuracy study the same front over (value, the ``syno.cost_ratio`` attr)."""
    if is_pareto(study):
        front = [t for t in study.best_trials if not t.user_attrs.get(V.BASELINE)]
    else:
        sign = 1.0 if maximizes(study) else -1.0
        ops = [t for t in _operators(study) if cost_of(t) is not None]
        front = [t for t in ops if not any(
            sign * primary_value(o) >= sign * primary_value(t) and cost_of(o) <= cost_of(t)  # type: ignore[operator]
            and (sign * primary_value(o) > sign * primary_value(t) or cost_of(o) < cost_of(t))  # type: ignore[operator]
            for o in ops)]
    return sorted(front, key=lambda t: (speed_ratio_of(study, t) or 0.0, t.number))


def best_operator_trial(study: optuna.Study) -> FrozenTrial | None:
    """The best completed operator trial (never the baseline): the best value in the study's direction; in a
    pareto study the most accurate operator of the front (the faster one on a tie: its speed ratio)."""
    sign = 1.0 if maximizes(study) else -1.0
    if not is_pareto(study):
        ops = _operators(study)
        return max(ops, key=lambda t: sign * primary_value(t)) if ops else None  # type: ignore[operator]
    ops = operator_front(study)
    if not ops:
        return None
    return max(ops, key=lambda t: (sign * primary_value(t), -(speed_ratio_of(study, t) or 0.0),  # type: ignore[operator]
                                   -t.number))
