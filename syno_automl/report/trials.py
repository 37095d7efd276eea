"""The trials as a report shows them: loss-vs-step curves (lm), the trial table, the space's canonical-rate table."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.search.objectives import cost_of, objective_name, primary_value

__all__ = ["plot_loss_curves", "canonical_rate_table", "trial_table"]


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
    """Markdown table of the space's per-depth candidates vs canonical children (from ``space.stats()``); a depth
    where nothing was tried (the deepest: operators end there) has no rate, ``-``.

    Example:
        >>> print(canonical_rate_table({"depths": [{"depth": 0, "candidates": 4, "canonical": 3},
        ...                                        {"depth": 1, "candidates": 0, "canonical": 0}]}))
        | depth | candidates | canonical | canonical rate |
        |---:|---:|---:|---:|
        | 0 | 4 | 3 | 0.750 |
        | 1 | 0 | 0 | - |
    """
    lines = ["| depth | candidates | canonical | canonical rate |", "|---:|---:|---:|---:|"]
    for i, d in enumerate(stats.get("depths", [])):
        tried, kept = d.get("candidates", 0), d.get("canonical", 0)
        rate = f"{kept / tried:.3f}" if tried else "-"
        lines.append(f"| {d.get('depth', i)} | {tried} | {kept} | {rate} |")
    return "\n".join(lines)


def trial_table(study: optuna.Study) -> str:
    """Markdown table of every trial (failed and pruned ones too): number, state, operator, FLOPs ratio,
    cost ratio, objective value (a pruned trial's: its last reported one), why it failed or was pruned."""
    name = objective_name(study)
    lines = [f"| trial | state | operator | flops ratio | cost ratio | {name} | reason |",
             "|---:|---|---|---:|---:|---:|---|"]
    for t in study.get_trials(deepcopy=False):
        label = "baseline" if t.user_attrs.get(V.BASELINE) else t.user_attrs.get(V.HASH, "-")
        ratio = t.user_attrs.get(V.FLOPS_RATIO)
        cost = cost_of(t)  # planned cost vs the replaced layers' (Operator.cost)
        value = primary_value(t)
        if value is None and t.intermediate_values:  # pruned (pareto: see the companion study)
            value = t.intermediate_values[max(t.intermediate_values)]
        reason = str(t.user_attrs.get(V.FAILURE) or t.user_attrs.get(V.PRUNED) or "")
        reason = reason.replace("|", "/").replace("\n", " ")[:200]
        lines.append(f"| {t.number} | {t.state.name} | {label} | {'-' if ratio is None else f'{ratio:.3f}'} | "
                     f"{'-' if cost is None else f'{cost:.3f}'} | "
                     f"{'-' if value is None else f'{value:.4f}'} | {reason} |")
    return "\n".join(lines)


