"""The report's Pareto front of accuracy (or loss) against the planned cost ratio: the figure and the table.

In a pareto study the front is ``study.best_trials`` (the baseline, infeasible, is never on it); in an accuracy
study it is the same non-dominated set computed over the ``syno.cost_ratio`` attribute
(syno_automl.search.objectives.operator_front). The baseline is drawn at cost ratio 1.0.

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
    baseline_trial,
    cost_of,
    maximizes,
    objective_name,
    operator_front,
    primary_value,
)

__all__ = ["front_points", "front_table", "plot_cost_front"]


def front_points(study: optuna.Study) -> list[Point]:
    """The operators of the front, by increasing cost ratio."""
    return [Point(t.number, t.user_attrs.get(V.HASH), cost, value, False) for t in operator_front(study)
            if (cost := cost_of(t)) is not None and (value := primary_value(t)) is not None]


def front_table(study: optuna.Study) -> str:
    """Markdown: the front's trials with their objective, planned cost ratio, planned speedup (1 / cost ratio)
    and difference to the baseline's objective."""
    name = objective_name(study)
    base = baseline_trial(study)
    base_value = primary_value(base) if base is not None else None
    lines = [f"| trial | operator | {name} | cost ratio | planned speedup | {name} vs baseline |",
             "|---:|---|---:|---:|---:|---:|"]
    for p in front_points(study):
        delta = "-" if base_value is None else f"{p.value - base_value:+.4f}"
        lines.append(f"| {p.trial} | {p.hash or '-'} | {p.value:.4f} | {p.cost:.3f} | "
                     f"{1.0 / p.cost if p.cost > 0 else float('inf'):.2f}x | {delta} |")
    return "\n".join(lines)


def plot_cost_front(study: optuna.Study, out_stem: str | Path, **axis: Any) -> list[Path]:
    """``<out_stem>.png`` / ``.svg``: every completed trial's objective vs planned cost ratio, the front
    highlighted, the baseline (cost 1.0) starred, the search's cost budget as a vertical line."""
    settings = study.user_attrs.get(V.SETTINGS, {})
    axis.setdefault("maximize", maximizes(study))
    return plot_pareto(points_of(study, cost=V.COST_RATIO), out_stem, front=front_points(study),
                       cost_axis=CostAxis("planned cost / replaced layers' cost", settings.get("cost_ratio"),
                                          "cost budget"),
                       title=f"{study.study_name}: {objective_name(study)} vs planned cost (front: best_trials)",
                       **axis)
