"""The report's Pareto front of accuracy (or loss) against the study's speed ratio: the figure and the table.

In a pareto study the front is ``study.best_trials`` (the baseline, infeasible, is never on it), drawn against
the study's second objective: the measured time ratio (``--speed-objective measured``: model time over the
original's, 1 / speedup) or the planned cost ratio; in an accuracy study it is the same non-dominated set computed
over the ``syno.cost_ratio`` attribute (syno_automl.search.objectives.operator_front). The baseline is drawn at 1.0.

Example:
    >>> import optuna
    >>> study = optuna.create_study(directions=["maximize", "minimize"])
    >>> study.add_trial(optuna.trial.create_trial(values=[0.9, 0.5], user_attrs={"syno.hash": "ab12"}))
    >>> print(front_table(study).splitlines()[-1])
    | 0 | ab12 | 0.9000 | 0.500 | 2.00x | - |
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.report.pareto import CostAxis, Point, plot_pareto, points_of
from syno_automl.search.objectives import (
    TIME_RATIO,
    baseline_trial,
    maximizes,
    objective_name,
    operator_front,
    primary_value,
    speed_ratio_label,
    speed_ratio_name,
    speed_ratio_of,
)

__all__ = ["front_points", "front_table", "plot_cost_front"]


def _measured(study: optuna.Study) -> bool:
    return speed_ratio_name(study) == TIME_RATIO


def front_points(study: optuna.Study) -> list[Point]:
    """The operators of the front, by increasing speed ratio (:func:`speed_ratio_of`)."""
    return [Point(t.number, t.user_attrs.get(V.HASH), ratio, value, False) for t in operator_front(study)
            if (ratio := speed_ratio_of(study, t)) is not None and (value := primary_value(t)) is not None]


def ratio_points(study: optuna.Study) -> list[Point]:
    """Every completed trial with its objective and its speed ratio (the baseline's 1.0)."""
    trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return [Point(t.number, t.user_attrs.get(V.HASH), ratio, value, bool(t.user_attrs.get(V.BASELINE)))
            for t in trials if (ratio := speed_ratio_of(study, t)) is not None
            and (value := primary_value(t)) is not None]


def front_table(study: optuna.Study) -> str:
    """Markdown: the front's trials with their objective, speed ratio (measured time or planned cost), the speedup
    it means (1 / ratio) and difference to the baseline's objective."""
    name = objective_name(study)
    base = baseline_trial(study)
    base_value = primary_value(base) if base is not None else None
    ratio, speedup = ("time ratio", "measured speedup") if _measured(study) else ("cost ratio", "planned speedup")
    lines = [f"| trial | operator | {name} | {ratio} | {speedup} | {name} vs baseline |",
             "|---:|---|---:|---:|---:|---:|"]
    for p in front_points(study):
        delta = "-" if base_value is None else f"{p.value - base_value:+.4f}"
        lines.append(f"| {p.trial} | {p.hash or '-'} | {p.value:.4f} | {p.cost:.3f} | "
                     f"{1.0 / p.cost if p.cost > 0 else float('inf'):.2f}x | {delta} |")
    return "\n".join(lines)


def plot_cost_front(study: optuna.Study, out_stem: str | Path, **axis: Any) -> list[Path]:
    """``<out_stem>.png`` / ``.svg``: every completed trial's objective vs the study's speed ratio, the front
    highlighted, the baseline (1.0) starred; against the planned cost, the search's cost budget as a vertical
    line (a measured time ratio has no budget line: the budget bounds the plan)."""
    settings = study.user_attrs.get(V.SETTINGS, {})
    axis.setdefault("maximize", maximizes(study))
    if _measured(study):
        cost_axis = CostAxis("measured model time / the original's", None, "")
        points = ratio_points(study)
    else:
        cost_axis = CostAxis("planned cost / replaced layers' cost", settings.get("cost_ratio"), "cost budget")
        points = points_of(study, cost=V.COST_RATIO)
    against = speed_ratio_label(study) or "planned cost"
    return plot_pareto(points, out_stem, front=front_points(study), cost_axis=cost_axis,
                       title=f"{study.study_name}: {objective_name(study)} vs {against} (front: best_trials)", **axis)
