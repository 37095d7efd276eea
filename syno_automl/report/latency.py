"""Latency figures found after the search by ``syno-automl tune`` (study attributes): series and table."""
from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.report.pareto import Point, Series
from syno_automl.report.reevaluation import number_text
from syno_automl.search.objectives import primary_value

__all__ = ["LatencyFigure", "latency_figures", "latency_series", "latency_table"]


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
        if base is not None and base_value is not None and baselines:
            points.append(Point(base.number, None, statistics.median(baselines), base_value, True))
        if points:
            out.append(Series(label, tuple(points)))
    return out


def latency_table(study: optuna.Study) -> str:
    """Markdown: per trial and device, the search's latency beside `tune`'s, each with its label."""
    figures = latency_figures(study)
    if not figures:
        return ("No per-layer latency was measured with TVM (`syno-automl search --latency`, `syno-automl tune`); "
                "the whole model's speedups are the final stage's, in the verdict above.")
    rows: dict[tuple[int, str], dict[str, list[LatencyFigure]]] = {}
    for f in figures:
        rows.setdefault((f.trial, f.device), {}).setdefault(f.source, []).append(f)

    def cell(found: list[LatencyFigure] | None) -> str:
        if not found:
            return "-"
        return "; ".join(f"{f.latency_ms:.4g} ms vs {number_text(f.baseline_ms, 4)} ms, "
                         f"{'-' if f.speedup is None else f'{f.speedup:.2f}x'} ({f.label})" for f in found)

    lines = ["| trial | operator | device | search (operator vs replaced layers, speedup) | tune (same) |",
             "|---:|---|---|---|---|"]
    for (number, device), by_source in sorted(rows.items()):
        op_hash = (by_source.get("search") or by_source["tune"])[0].hash
        lines.append(f"| {number} | {op_hash or '-'} | {device} | {cell(by_source.get('search'))} | "
                     f"{cell(by_source.get('tune'))} |")
    return "\n".join(lines)
