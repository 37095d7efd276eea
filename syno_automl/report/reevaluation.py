"""Figures found after the search by ``syno-automl reevaluate`` (MLflow runs), beside the search's own."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.report.pareto import Point, Series
from syno_automl.search.objectives import primary_value
from syno_automl.words import counted

__all__ = ["Reevaluation", "number_text", "search_label", "reevaluations_of", "reevaluation_series",
           "reevaluation_table"]


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
        return counted(settings.get("max_steps"), "steps")
    epochs = settings.get("epochs")
    return counted(epochs, "epochs")


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


def number_text(value: float | None, digits: int = 4) -> str:
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
        lines.append(f"| {'-' if r.trial is None else r.trial} | {r.hash or 'baseline'} | {number_text(before)} | "
                     f"{number_text(r.value)} | {r.label} | {'-' if delta is None else f'{delta:+.4f}'} | "
                     f"{number_text(r.flops_ratio, 3)} | {r.run_id} | {status} |")
    return "\n".join(lines)


