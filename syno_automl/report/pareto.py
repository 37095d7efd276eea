"""The search's points (objective against FLOPs, cost or latency), their Pareto front and its plot.

Example:
    >>> points = [Point(0, None, 1.0, 0.98, True), Point(1, "ab", 0.3, 0.97, False)]
    >>> [p.trial for p in pareto_front(points)]
    [1, 0]
    >>> [p.trial for p in pareto_front([Point(0, None, 1.0, 2.1, True), Point(1, "ab", 0.3, 2.3, False)],
    ...                                maximize=False)]
    [1, 0]
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna

from syno_automl import vocabulary as V
from syno_automl.search.objectives import primary_value

__all__ = ["Point", "points_of", "latency_points", "latency_schedules", "latency_devices", "pareto_front", "Series",
           "CostAxis", "plot_pareto"]


@dataclass(frozen=True)
class Point:
    """One completed trial: its cost (FLOPs ratio, or latency) and its objective value (accuracy or loss)."""

    trial: int
    hash: str | None
    cost: float
    value: float
    baseline: bool


def points_of(study: optuna.Study, cost: str = V.FLOPS_RATIO) -> list[Point]:
    """Completed trials with a value and the user attr `cost` (``syno.flops_ratio``, ``syno.latency_ms.cpu``)."""
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        value = t.user_attrs.get(cost)
        if value is None and cost == V.COST_RATIO and t.user_attrs.get(V.BASELINE):
            value = 1.0  # the replaced layers' own cost
        objective = primary_value(t)
        if value is None or objective is None:
            continue
        out.append(Point(t.number, t.user_attrs.get(V.HASH), float(value), objective,
                         bool(t.user_attrs.get(V.BASELINE))))
    return out


def latency_points(study: optuna.Study, device: str) -> list[Point]:
    """Objective vs measured latency (ms, the replaced layers only) of the operators measured on ``device``: by
    the search (trial attr ``syno.latency``) or by ``syno-automl tune`` (study attr ``syno.latency``, which wins:
    it is the later, deliberate measurement). The baseline point is the replaced layers' latency."""
    measured = study.user_attrs.get(V.LATENCY, {})
    out: list[Point] = []
    base = next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(V.BASELINE)), None)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        entry = measured.get(t.user_attrs.get(V.HASH), {}).get(device)
        if entry is None:
            entry = (t.user_attrs.get(V.LATENCY) or {}).get(device)
        value = primary_value(t)
        if entry is None or value is None or entry.get("latency_ms") is None:
            continue
        out.append(Point(t.number, t.user_attrs.get(V.HASH), entry["latency_ms"], value, False))
        base_value = primary_value(base) if base is not None else None
        if base is not None and base_value is not None and entry.get("baseline_ms") is not None and \
                not any(p.baseline for p in out):
            out.append(Point(base.number, None, entry["baseline_ms"], base_value, True))
    return out


def latency_schedules(study: optuna.Study, device: str) -> list[str]:
    """How the latencies on ``device`` were scheduled (e.g. "untuned default schedules ..."), for the plot."""
    entries = [e.get(device) for e in study.user_attrs.get(V.LATENCY, {}).values()]
    entries += [(t.user_attrs.get(V.LATENCY) or {}).get(device) for t in study.get_trials(deepcopy=False)]
    labels = {e.get("schedules") or ("untuned default schedules" if not e.get("tuned_trials") else
                                     f"{e['tuned_trials']} MetaSchedule trials per kernel")
              for e in entries if e}
    return sorted(labels)


def latency_devices(study: optuna.Study) -> list[str]:
    """Devices with latencies in the study (from `syno-automl tune` or measured by the search)."""
    found = {d for entry in study.user_attrs.get(V.LATENCY, {}).values() for d in entry}
    for t in study.get_trials(deepcopy=False):
        found.update((t.user_attrs.get(V.LATENCY) or {}).keys())
    return sorted(found)


def pareto_front(points: Iterable[Point], maximize: bool = True) -> list[Point]:
    """Points no other point beats on both axes (lower cost, better value), by increasing cost."""
    sign = 1.0 if maximize else -1.0
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.cost, -sign * p.value)):
        if not front or sign * p.value > sign * front[-1].value:
            front.append(p)
    return front


@dataclass(frozen=True)
class Series:
    """Figures found after the search (``re-evaluated at 10 epochs``, ``tune: tuned 64 trials``), drawn beside
    the search's: each point is linked to the same trial's search point by a dotted line."""

    label: str
    points: tuple[Point, ...]


_SERIES_COLORS = ("#ee7733", "#aa3377", "#009988", "#ccbb44", "#66ccee", "#332288")


@dataclass(frozen=True)
class CostAxis:
    """The x axis of a Pareto plot: which cost it shows and the search's limit on it (drawn as a vertical line,
    with ``budget_label`` in the legend; None: no line)."""

    label: str = "FLOPs / baseline FLOPs"
    budget: float | None = None
    budget_label: str = "FLOPs budget"


def plot_pareto(points: Sequence[Point], out_stem: str | Path, *, cost_axis: CostAxis = CostAxis(),
                title: str = "Accuracy vs FLOPs", maximize: bool = True,
                ylabel: str = "validation accuracy", label: str = "operators",
                series: Sequence[Series] = (), front: Sequence[Point] | None = None) -> list[Path]:
    """Writes ``<out_stem>.png`` and ``.svg``: every trial (`label`), the Pareto front (`front`, e.g. the study's
    best_trials, highlighted; default: computed from `points`), the baseline as a red star (with the "within
    1 pp" line for accuracies), the budget of `cost_axis` (the search's limit) as a vertical line, and each
    of `series` in its own colour and legend entry, linked to the search's points of the same trials."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    ops = [p for p in points if not p.baseline]
    base = [p for p in points if p.baseline]
    if ops:
        ax.scatter([p.cost for p in ops], [p.value for p in ops], s=22, color="#4477aa", alpha=0.75,
                   label=label)
    given = front is not None
    front = sorted(front, key=lambda p: p.cost) if front is not None else pareto_front(points, maximize)
    if len(front) > 1 or (given and front):
        ax.step([p.cost for p in front], [p.value for p in front], where="post", color="#228833", lw=1.2,
                label="Pareto front")
    if given and front:
        ax.scatter([p.cost for p in front], [p.value for p in front], s=46, facecolors="none",
                   edgecolors="#228833", linewidths=1.4, zorder=4)
    for p in base:
        ax.scatter([p.cost], [p.value], marker="*", s=180, color="#cc3311", zorder=5, label="baseline")
        if maximize:
            ax.axhline(p.value - 0.01, color="#cc3311", lw=0.6, ls=":", label="baseline - 1 pp")
    if cost_axis.budget is not None:
        ax.axvline(cost_axis.budget, color="#777777", lw=0.8, ls="--",
                   label=f"{cost_axis.budget_label} {cost_axis.budget:g}x")
    by_trial = {(p.trial, p.baseline): p for p in points}
    for i, extra in enumerate(series):
        color = _SERIES_COLORS[i % len(_SERIES_COLORS)]
        for p in extra.points:
            first = by_trial.get((p.trial, p.baseline))
            if first is not None:
                ax.plot([first.cost, p.cost], [first.value, p.value], color=color, lw=0.7, ls=":")
        later = [p for p in extra.points if not p.baseline]
        if later:
            ax.scatter([p.cost for p in later], [p.value for p in later], s=30, marker="D", facecolors="none",
                       edgecolors=color, label=extra.label)
        for p in extra.points:
            if p.baseline:
                ax.scatter([p.cost], [p.value], marker="*", s=180, facecolors="none", edgecolors=color, zorder=5,
                           label=f"baseline, {extra.label}")
    for p in front:
        if not p.baseline and p.hash:
            ax.annotate(p.hash[:6], (p.cost, p.value), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(cost_axis.label)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if points:
        ax.legend(fontsize=7, loc="best")
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths


