"""Reports of a search: objective vs FLOPs (or latency) Pareto plots, loss-vs-step curves (lm), and the
space's canonical-rate table.

Example:
    >>> points = [Point(0, None, 1.0, 0.98, True), Point(1, "ab", 0.3, 0.97, False)]
    >>> [p.trial for p in pareto_front(points)]
    [1, 0]
    >>> [p.trial for p in pareto_front([Point(0, None, 1.0, 2.1, True), Point(1, "ab", 0.3, 2.3, False)],
    ...                                maximize=False)]
    [1, 0]
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import optuna

from syno_automl import vocabulary as V

__all__ = ["Point", "points_of", "latency_points", "latency_devices", "latency_schedules", "pareto_front", "plot_pareto", "plot_loss_curves",
           "canonical_rate_table", "trial_table"]


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
        if value is None or t.value is None:
            continue
        out.append(Point(t.number, t.user_attrs.get(V.HASH), float(value), float(t.value),
                         bool(t.user_attrs.get(V.BASELINE))))
    return out


def latency_points(study: optuna.Study, device: str) -> list[Point]:
    """Objective vs measured latency (ms, the replaced layers only) of the operators measured on ``device``: by
    the search (trial attr ``syno.latency``) or by ``syno-automl tune`` (study attr ``syno.latency``, which wins:
    it is the later, deliberate measurement). The baseline point is the replaced layers' latency."""
    measured = study.user_attrs.get("syno.latency", {})
    out: list[Point] = []
    base = next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(V.BASELINE)), None)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        entry = measured.get(t.user_attrs.get(V.HASH), {}).get(device)
        if entry is None:
            entry = (t.user_attrs.get("syno.latency") or {}).get(device)
        if entry is None or t.value is None or entry.get("latency_ms") is None:
            continue
        out.append(Point(t.number, t.user_attrs.get("syno.hash"), entry["latency_ms"], float(t.value), False))
        if (base is not None and base.value is not None and entry.get("baseline_ms") is not None
                and not any(p.baseline for p in out)):
            out.append(Point(base.number, None, entry["baseline_ms"], float(base.value), True))
    return out


def latency_schedules(study: optuna.Study, device: str) -> list[str]:
    """How the latencies on ``device`` were scheduled (e.g. "untuned default schedules ..."), for the plot."""
    entries = [e.get(device) for e in study.user_attrs.get("syno.latency", {}).values()]
    entries += [(t.user_attrs.get("syno.latency") or {}).get(device) for t in study.get_trials(deepcopy=False)]
    labels = {e.get("schedules") or ("untuned default schedules" if not e.get("tuned_trials") else
                                     f"{e['tuned_trials']} MetaSchedule trials per kernel")
              for e in entries if e}
    return sorted(labels)


def latency_devices(study: optuna.Study) -> list[str]:
    """Devices with latencies in the study (from `syno-automl tune` or measured by the search)."""
    found = {d for entry in study.user_attrs.get("syno.latency", {}).values() for d in entry}
    for t in study.get_trials(deepcopy=False):
        found.update((t.user_attrs.get("syno.latency") or {}).keys())
    return sorted(found)


def pareto_front(points: Iterable[Point], maximize: bool = True) -> list[Point]:
    """Points no other point beats on both axes (lower cost, better value), by increasing cost."""
    sign = 1.0 if maximize else -1.0
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.cost, -sign * p.value)):
        if not front or sign * p.value > sign * front[-1].value:
            front.append(p)
    return front


def plot_pareto(points: Sequence[Point], out_stem: str | Path, *, xlabel: str = "FLOPs / baseline FLOPs",
                title: str = "Accuracy vs FLOPs", maximize: bool = True,
                ylabel: str = "validation accuracy", budget: float | None = None) -> list[Path]:
    """Writes ``<out_stem>.png`` and ``.svg``: every trial, the Pareto front, the baseline as a red star
    (with the "within 1 pp" line for accuracies), and `budget` (the search's FLOPs limit) as a vertical line."""
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
                   label="operators")
    front = pareto_front(points, maximize)
    if len(front) > 1:
        ax.step([p.cost for p in front], [p.value for p in front], where="post", color="#228833", lw=1.2,
                label="Pareto front")
    for p in base:
        ax.scatter([p.cost], [p.value], marker="*", s=180, color="#cc3311", zorder=5, label="baseline")
        if maximize:
            ax.axhline(p.value - 0.01, color="#cc3311", lw=0.6, ls=":", label="baseline - 1 pp")
    if budget is not None:
        ax.axvline(budget, color="#777777", lw=0.8, ls="--", label=f"FLOPs budget {budget:g}x")
    for p in front:
        if not p.baseline and p.hash:
            ax.annotate(p.hash[:6], (p.cost, p.value), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if points:
        ax.legend(fontsize=7, loc="lower right" if maximize else "upper right")
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths


def plot_loss_curves(curves: dict[str, dict[str, Sequence[tuple[int, float]]]], out_stem: str | Path, *,
                     title: str = "Loss vs step", smooth: int = 10) -> list[Path]:
    """Writes ``<out_stem>.png`` and ``.svg``: per run (label -> {"train_loss": [(step, v)], "val_loss": ...}),
    the training loss (moving average over ``smooth`` steps) and the validation loss, side by side; the label
    "baseline" is drawn in red (the paper's Fig. 10)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=120)
    palette = ["#4477aa", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb"]
    for i, (label, series) in enumerate(curves.items()):
        color = "#cc3311" if label == "baseline" else palette[i % len(palette)]
        train = sorted(series.get("train_loss", []))
        if train:
            steps, values = zip(*train)
            window = max(1, min(smooth, len(values)))
            averaged = [sum(values[max(0, j - window + 1): j + 1]) / len(values[max(0, j - window + 1): j + 1])
                        for j in range(len(values))]
            left.plot(steps, averaged, color=color, lw=1.3 if label == "baseline" else 1.0, label=label)
        val = sorted(series.get("val_loss", []))
        if val:
            steps, values = zip(*val)
            right.plot(steps, values, color=color, marker="o", ms=3, lw=1.0, label=label)
    left.set_title(f"training loss (moving average, {smooth} steps)", fontsize=9)
    right.set_title("validation loss", fontsize=9)
    for ax in (left, right):
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.grid(alpha=0.3)
        if curves:
            ax.legend(fontsize=7)
    fig.suptitle(title)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths


def canonical_rate_table(stats: dict[str, Any]) -> str:
    """Markdown table of the space's per-depth candidates vs canonical children (from ``space.stats()``)."""
    lines = ["| depth | candidates | canonical | canonical rate |", "|---:|---:|---:|---:|"]
    for i, d in enumerate(stats.get("depths", [])):
        rate = d["canonical"] / d["candidates"] if d.get("candidates") else float("nan")
        lines.append(f"| {d.get('depth', i)} | {d.get('candidates', 0)} | {d.get('canonical', 0)} | {rate:.3f} |")
    return "\n".join(lines)


def trial_table(study: optuna.Study) -> str:
    """Markdown table of every trial (failed and pruned ones too): number, state, operator, FLOPs ratio,
    cost ratio, objective value (a pruned trial's: its last reported one), why it failed or was pruned."""
    name = "val_loss" if study.direction == optuna.study.StudyDirection.MINIMIZE else "val_acc"
    lines = [f"| trial | state | operator | flops ratio | cost ratio | {name} | reason |", "|---:|---|---|---:|---:|---:|---|"]
    for t in study.get_trials(deepcopy=False):
        label = "baseline" if t.user_attrs.get(V.BASELINE) else t.user_attrs.get(V.HASH, "-")
        ratio = t.user_attrs.get(V.FLOPS_RATIO)
        cost = t.user_attrs.get(V.COST_RATIO)  # planned cost vs the replaced layers' (Operator.cost)
        value = t.value if t.value is not None else (
            t.intermediate_values[max(t.intermediate_values)] if t.intermediate_values else None)
        reason = str(t.user_attrs.get(V.FAILURE) or t.user_attrs.get(V.PRUNED) or "")
        reason = reason.replace("|", "/").replace("\n", " ")[:200]
        lines.append(f"| {t.number} | {t.state.name} | {label} | {'-' if ratio is None else f'{ratio:.3f}'} | "
                     f"{'-' if cost is None else f'{cost:.3f}'} | "
                     f"{'-' if value is None else f'{value:.4f}'} | {reason} |")
    return "\n".join(lines)
