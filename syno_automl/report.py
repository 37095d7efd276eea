"""Reports of a search: accuracy vs FLOPs (or latency) Pareto plots, and the space's canonical-rate table.

Example:
    >>> points = [Point(0, None, 1.0, 0.98, True), Point(1, "ab", 0.3, 0.97, False)]
    >>> [p.trial for p in pareto_front(points)]
    [1, 0]
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import optuna

__all__ = ["Point", "points_of", "latency_points", "pareto_front", "plot_pareto", "canonical_rate_table", "trial_table"]


@dataclass(frozen=True)
class Point:
    """One completed trial: its cost (FLOPs ratio, or latency) and its accuracy."""

    trial: int
    hash: str | None
    cost: float
    accuracy: float
    baseline: bool


def points_of(study: optuna.Study, cost: str = "syno.flops_ratio") -> list[Point]:
    """Completed trials with a value and the user attr `cost` (``syno.flops_ratio``, ``syno.latency_ms.cpu``)."""
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        value = t.user_attrs.get(cost)
        if value is None or t.value is None:
            continue
        out.append(Point(t.number, t.user_attrs.get("syno.hash"), float(value), float(t.value),
                         bool(t.user_attrs.get("syno.baseline"))))
    return out


def latency_points(study: optuna.Study, device: str) -> list[Point]:
    """Accuracy vs measured latency (ms, the replaced layers only) of operators tuned with ``syno-automl tune``.

    The baseline point is the replaced layers' latency measured in the same run.
    """
    measured = study.user_attrs.get("syno.latency", {})
    out: list[Point] = []
    base = next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("syno.baseline")), None)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        entry = measured.get(t.user_attrs.get("syno.hash"), {}).get(device)
        if entry is None or t.value is None:
            continue
        out.append(Point(t.number, t.user_attrs.get("syno.hash"), entry["latency_ms"], float(t.value), False))
        if base is not None and base.value is not None and not any(p.baseline for p in out):
            out.append(Point(base.number, None, entry["baseline_ms"], float(base.value), True))
    return out


def pareto_front(points: Iterable[Point]) -> list[Point]:
    """Points no other point beats on both axes (lower cost, higher accuracy), by increasing cost."""
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.cost, -p.accuracy)):
        if not front or p.accuracy > front[-1].accuracy:
            front.append(p)
    return front


def plot_pareto(points: Sequence[Point], out_stem: str | Path, *, xlabel: str = "FLOPs / baseline FLOPs",
                title: str = "Accuracy vs FLOPs") -> list[Path]:
    """Writes ``<out_stem>.png`` and ``.svg``: every trial, the Pareto front, the baseline as a red star."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    ops = [p for p in points if not p.baseline]
    base = [p for p in points if p.baseline]
    if ops:
        ax.scatter([p.cost for p in ops], [p.accuracy for p in ops], s=22, color="#4477aa", alpha=0.75,
                   label="operators")
    front = pareto_front(points)
    if len(front) > 1:
        ax.step([p.cost for p in front], [p.accuracy for p in front], where="post", color="#228833", lw=1.2,
                label="Pareto front")
    for p in base:
        ax.scatter([p.cost], [p.accuracy], marker="*", s=180, color="#cc3311", zorder=5, label="baseline")
        ax.axhline(p.accuracy - 0.01, color="#cc3311", lw=0.6, ls=":", label="baseline - 1 pp")
    for p in front:
        if not p.baseline and p.hash:
            ax.annotate(p.hash[:6], (p.cost, p.accuracy), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if points:
        ax.legend(fontsize=7, loc="lower right")
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
    """Markdown table of the trials: number, state, operator, FLOPs ratio, accuracy."""
    lines = ["| trial | state | operator | flops ratio | val_acc |", "|---:|---|---|---:|---:|"]
    for t in study.get_trials(deepcopy=False):
        label = "baseline" if t.user_attrs.get("syno.baseline") else t.user_attrs.get("syno.hash", "-")
        ratio = t.user_attrs.get("syno.flops_ratio")
        lines.append(f"| {t.number} | {t.state.name} | {label} | "
                     f"{'-' if ratio is None else f'{ratio:.3f}'} | {'-' if t.value is None else f'{t.value:.4f}'} |")
    return "\n".join(lines)
