"""Reports of a search: objective vs FLOPs (or latency) Pareto plots, loss-vs-step curves (lm), the trials, the
figures found after the search beside the search's own (``reevaluate``: retrained at another budget, the baseline
too; ``tune``: latency with tuned schedules), and the space's canonical-rate table.

Example:
    >>> points = [Point(0, None, 1.0, 0.98, True), Point(1, "ab", 0.3, 0.97, False)]
    >>> [p.trial for p in pareto_front(points)]
    [1, 0]
    >>> [p.trial for p in pareto_front([Point(0, None, 1.0, 2.1, True), Point(1, "ab", 0.3, 2.3, False)],
    ...                                maximize=False)]
    [1, 0]
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import optuna

from syno_automl import vocabulary as V
from syno_automl.search.objectives import cost_of, objective_name, primary_value

__all__ = ["Point", "points_of", "latency_points", "latency_devices", "latency_schedules", "pareto_front",
           "plot_pareto", "plot_loss_curves", "canonical_rate_table", "trial_table", "Series", "Reevaluation",
           "reevaluations_of", "reevaluation_series", "reevaluation_table", "LatencyFigure", "latency_figures",
           "latency_series", "latency_table"]


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
        if entry is None or primary_value(t) is None or entry.get("latency_ms") is None:
            continue
        out.append(Point(t.number, t.user_attrs.get(V.HASH), entry["latency_ms"], primary_value(t), False))
        base_value = primary_value(base) if base is not None else None
        if base_value is not None and entry.get("baseline_ms") is not None and not any(p.baseline for p in out):
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


def plot_pareto(points: Sequence[Point], out_stem: str | Path, *, xlabel: str = "FLOPs / baseline FLOPs",
                title: str = "Accuracy vs FLOPs", maximize: bool = True,
                ylabel: str = "validation accuracy", budget: float | None = None, label: str = "operators",
                series: Sequence[Series] = (), front: Sequence[Point] | None = None,
                budget_label: str = "FLOPs budget") -> list[Path]:
    """Writes ``<out_stem>.png`` and ``.svg``: every trial (`label`), the Pareto front (`front`, e.g. the study's
    best_trials, highlighted; default: computed from `points`), the baseline as a red star (with the "within
    1 pp" line for accuracies), `budget` (the search's limit) as a vertical line, and each of `series` in its own
    colour and legend entry, linked to the search's points of the same trials."""
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
    if budget is not None:
        ax.axvline(budget, color="#777777", lw=0.8, ls="--", label=f"{budget_label} {budget:g}x")
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
    ax.set_xlabel(xlabel)
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
    lines = [f"| trial | state | operator | flops ratio | cost ratio | {name} | reason |", "|---:|---|---|---:|---:|---:|---|"]
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


# -- figures found after the search: `syno-automl reevaluate` (MLflow runs) and `syno-automl tune` (study attr) --


@dataclass(frozen=True)
class Reevaluation:
    """One ``syno-automl reevaluate`` run (MLflow tag ``syno.role = reevaluation``) of a search trial."""

    trial: int | None
    hash: str | None        # None: the baseline (the original layers)
    label: str              # "re-evaluated at 10 epochs" (and what else differs from the search)
    value: float | None     # the objective at the end of training; None when the run did not finish
    status: str             # the MLflow run's: FINISHED, FAILED, RUNNING...
    flops_ratio: float | None
    run_id: str
    reason: str | None = None


def _param(value: Any) -> str:
    # how TrialRun.log_params wrote a setting (strings as is, the rest as JSON)
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _budget(task: str, settings: Mapping[str, Any]) -> str:
    if task == "lm":
        return f"{settings.get('max_steps')} steps"
    epochs = settings.get("epochs")
    return f"{epochs} epoch{'' if str(epochs) == '1' else 's'}"


def search_label(settings: Mapping[str, Any]) -> str:
    """The search's own training budget, as the reports show it beside the re-evaluated one: ``search, 1 epoch``."""
    return "search, " + _budget(str(settings.get("task", "image")), settings)


def reevaluations_of(runs: Iterable[Any], study: optuna.Study, objective: str) -> list[Reevaluation]:
    """The re-evaluations among MLflow `runs` (``SearchTracker.reevaluation_runs``) of `study`, the latest run per
    trial and label; labelled by their budget and by the settings (model, dataset...) that differ from the
    search's (the study attr ``syno.settings``)."""
    search = study.user_attrs.get(V.SETTINGS, {})
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    latest: dict[tuple[int | None, str | None, str], Reevaluation] = {}
    for run in runs:
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        if tags.get(V.TAG_ROLE) != "reevaluation":
            continue
        settings = {k[len("search."):]: v for k, v in params.items() if k.startswith("search.")}
        task = settings.get("task", str(search.get("task", "image")))
        differs = [f"{k} {settings[k]}" for k in ("model", "dataset", "image_size", "batch_size", "lr", "seed")
                   if k in settings and k in search and settings[k] != _param(search[k])]
        label = "re-evaluated at " + _budget(task, settings) + (f" ({', '.join(differs)})" if differs else "")
        number = int(tags[V.TAG_SEARCH_TRIAL]) if str(tags.get(V.TAG_SEARCH_TRIAL, "")).isdigit() else None
        trial = trials.get(number) if number is not None else None
        op_hash = tags.get(V.TAG_HASH)
        op_hash = None if op_hash in (None, "baseline") else op_hash
        ratio = metrics.get(V.METRIC_FLOPS_RATIO)
        if ratio is None and trial is not None:
            ratio = trial.user_attrs.get(V.FLOPS_RATIO)
        finished = run.info.status == "FINISHED"
        latest[(number, op_hash, label)] = Reevaluation(
            number, op_hash, label, metrics.get(objective) if finished else None, run.info.status,
            None if ratio is None else float(ratio), run.info.run_id, tags.get(V.TAG_FAILURE))
    return list(latest.values())


def reevaluation_series(found: Sequence[Reevaluation]) -> list[Series]:
    """One Series per label, for the FLOPs plot beside the search's points (finished runs with a FLOPs ratio)."""
    out: dict[str, list[Point]] = {}
    for r in found:
        if r.value is not None and r.flops_ratio is not None:
            out.setdefault(r.label, []).append(Point(r.trial if r.trial is not None else -1, r.hash, r.flops_ratio,
                                                     float(r.value), r.hash is None))
    return [Series(label, tuple(points)) for label, points in sorted(out.items())]


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def reevaluation_table(found: Sequence[Reevaluation], study: optuna.Study, objective: str) -> str:
    """Markdown: each re-evaluated trial, its search value beside the re-evaluated one, and the difference to the
    baseline re-evaluated under the same label (the only fair comparison)."""
    if not found:
        return "No trial was re-evaluated (`syno-automl reevaluate`)."
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    base = {r.label: r.value for r in found if r.hash is None and r.value is not None}
    first = search_label(study.user_attrs.get(V.SETTINGS, {}))
    lines = [f"| trial | operator | {objective} ({first}) | {objective} re-evaluated | label | "
             "vs baseline (same label) | flops ratio | MLflow run | status |",
             "|---:|---|---:|---:|---|---:|---:|---|---|"]
    order = sorted(found, key=lambda r: (r.label, r.hash is not None, -1 if r.trial is None else r.trial))
    for r in order:
        trial = trials.get(r.trial) if r.trial is not None else None
        before = primary_value(trial) if trial is not None else None
        delta = (r.value - base[r.label]) if r.hash is not None and r.value is not None and r.label in base else None
        status = r.status + (f": {r.reason}".replace("|", "/").replace("\n", " ")[:160] if r.reason else "")
        lines.append(f"| {'-' if r.trial is None else r.trial} | {r.hash or 'baseline'} | {_number(before)} | "
                     f"{_number(r.value)} | {r.label} | {'-' if delta is None else f'{delta:+.4f}'} | "
                     f"{_number(r.flops_ratio, 3)} | {r.run_id} | {status} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class LatencyFigure:
    """One operator's latency on one device, as measured by the search (trial attr ``syno.latency``) or by
    ``syno-automl tune`` (study attr ``syno.latency``)."""

    trial: int
    hash: str | None
    device: str
    source: str             # "search" | "tune"
    label: str              # "search: untuned", "tune: tuned 64 trials", "tune: eager"
    latency_ms: float
    baseline_ms: float | None
    speedup: float | None
    value: float | None     # the trial's objective value


def _latency_label(source: str, entry: Mapping[str, Any]) -> str:
    from syno_automl.measure.result import schedules_tag

    tag = entry.get("tag") or schedules_tag(int(entry.get("tuned_trials") or 0))
    return f"{source}: {tag}"


def latency_figures(study: optuna.Study) -> list[LatencyFigure]:
    """Every latency the study holds: the search's first, then `tune`'s, by trial."""
    tuned = study.user_attrs.get(V.LATENCY, {})
    out: list[LatencyFigure] = []
    for source in ("search", "tune"):
        for t in study.get_trials(deepcopy=False):
            op_hash = t.user_attrs.get(V.HASH)
            entries = (t.user_attrs.get(V.LATENCY) or {}) if source == "search" else tuned.get(op_hash, {})
            for device, e in sorted(entries.items()):
                if e and e.get("latency_ms") is not None:
                    out.append(LatencyFigure(t.number, op_hash, device, source, _latency_label(source, e),
                                             float(e["latency_ms"]), e.get("baseline_ms"), e.get("speedup"),
                                             primary_value(t)))
    return out


def latency_series(study: optuna.Study, device: str) -> list[Series]:
    """Objective vs latency on `device`, one Series per label (the search's first): completed trials, and the
    baseline at the median latency of the replaced layers measured beside them."""
    base = next((t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(V.BASELINE)), None)
    grouped: dict[str, list[LatencyFigure]] = {}
    for f in latency_figures(study):
        if f.device == device:
            grouped.setdefault(f.label, []).append(f)
    out = []
    for label, figures in sorted(grouped.items(), key=lambda kv: (not kv[0].startswith("search"), kv[0])):
        points = [Point(f.trial, f.hash, f.latency_ms, float(f.value), False) for f in figures if f.value is not None]
        baselines = [f.baseline_ms for f in figures if f.baseline_ms is not None]
        base_value = primary_value(base) if base is not None else None
        if base_value is not None and baselines:
            points.append(Point(base.number, None, statistics.median(baselines), base_value, True))
        if points:
            out.append(Series(label, tuple(points)))
    return out


def latency_table(study: optuna.Study) -> str:
    """Markdown: per trial and device, the search's latency beside `tune`'s, each with its label."""
    figures = latency_figures(study)
    if not figures:
        return "No latency was measured (`syno-automl search --latency`, `syno-automl tune`)."
    rows: dict[tuple[int, str], dict[str, list[LatencyFigure]]] = {}
    for f in figures:
        rows.setdefault((f.trial, f.device), {}).setdefault(f.source, []).append(f)

    def cell(found: list[LatencyFigure] | None) -> str:
        if not found:
            return "-"
        return "; ".join(f"{f.latency_ms:.4g} ms vs {_number(f.baseline_ms, 4)} ms, "
                         f"{'-' if f.speedup is None else f'{f.speedup:.2f}x'} ({f.label})" for f in found)

    lines = ["| trial | operator | device | search (operator vs replaced layers, speedup) | tune (same) |",
             "|---:|---|---|---|---|"]
    for (number, device), by_source in sorted(rows.items()):
        op_hash = (by_source.get("search") or by_source.get("tune"))[0].hash
        lines.append(f"| {number} | {op_hash or '-'} | {device} | {cell(by_source.get('search'))} | "
                     f"{cell(by_source.get('tune'))} |")
    return "\n".join(lines)
