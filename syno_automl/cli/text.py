"""The printed lines of ``syno-automl tune`` and of the search's latency measurements (CLI text only)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.measure.result import EAGER, UNTUNED

__all__ = ["layer_line", "total_line", "progress_printer"]


def _ms(lat: Mapping[str, Any] | None) -> str:
    lat = lat or {}
    if lat.get("median_ms") is None:
        return f"missing ({lat.get('note') or 'not measured'})"
    iqr = f" (IQR {lat['iqr_ms']:.4f})" if lat.get("iqr_ms") is not None else ""
    return f"{lat['median_ms']:.4f} ms{iqr}"


def layer_line(layer: Mapping[str, Any], schedules: str = "") -> str:
    """One printed line for a layer of :func:`measure_layers` (``devices[<device>]["layers"][i]``)."""
    op, base = layer.get("operator") or {}, layer.get("baseline") or {}
    what = layer.get("replaced") or ", ".join(f"{k}={v}" for k, v in (layer.get("sizes") or {}).items())
    if not base:
        base = {"note": next((v for k, v in layer.get("notes", {}).items() if k.startswith(V.speedup_metric(""))
                              and not k.startswith(V.speedup_metric(V.INDUCTOR))), "")}
    text = f"layer {layer['layer']} ({what}): operator {_ms(op)}, replaced layer {_ms(base)}"
    if layer.get("speedup") is not None:
        text += f" -> {layer['speedup']:.2f}x"
    if schedules == EAGER:
        text += f" [{EAGER}]"
    elif schedules == UNTUNED or (not schedules and not any(k.get("tuned_trials") for k in (op, base))):
        text += f" [{UNTUNED}]"
    else:
        reused = " (from the database)" if op.get("reused") and base.get("reused") else ""
        text += (f" [MetaSchedule-tuned: {op.get('tuned_trials') or 0} / {base.get('tuned_trials') or 0} trials "
                 f"(operator / replaced layer){reused}]")
    ind = layer.get("inductor")
    if ind is not None:
        if (ind.get("operator") or {}).get("median_ms") is None:
            why = (ind.get("operator") or {}).get("note") or next(
                (v for k, v in layer.get("notes", {}).items() if k.startswith(V.latency_metric(V.INDUCTOR))), "")
            text += f"; inductor: missing ({why})"
        else:
            text += f"; inductor: operator {_ms(ind['operator'])}, replaced layer {_ms(ind.get('baseline'))}"
            if ind.get("speedup") is not None:
                text += f" -> {ind['speedup']:.2f}x"
    return text


def total_line(summary: Mapping[str, Any], device: str) -> str:
    """The printed total of one device of :func:`measure_layers` (``devices[<device>]``)."""
    n = len(summary["layers"])
    text = f"total over {n} layer{'s' if n != 1 else ''} on {device} [{summary['schedules']}]: "
    if summary.get("latency_ms") is None or summary.get("baseline_ms") is None:
        text += "missing (" + "; ".join(f"{k}: {v}" for k, v in summary.get("notes", {}).items()) + ")"
    else:
        text += (f"operator {summary['latency_ms']:.4f} ms vs replaced layers {summary['baseline_ms']:.4f} ms "
                 f"-> speedup {summary['speedup']:.2f}x")
    if "inductor_ms" in summary:
        if summary.get("inductor_ms") is None:
            why = next((v for k, v in summary.get("notes", {}).items()
                        if k.startswith(V.latency_metric(V.INDUCTOR))), "")
            text += f"; inductor: missing ({why})"
        else:
            text += f"; inductor: operator {summary['inductor_ms']:.4f} ms"
            if summary.get("inductor_baseline_ms") is not None:
                text += (f" vs replaced layers {summary['inductor_baseline_ms']:.4f} ms -> speedup "
                         f"{summary['inductor_speedup']:.2f}x")
    return text


def progress_printer(quiet: bool = False, stream: Any = None) -> Callable[[str], None] | None:
    """The ``progress`` callable of the measures (one indented, flushed line each), or None with ``quiet``."""
    if quiet:
        return None
    out = stream if stream is not None else sys.stdout

    def show(line: str) -> None:
        print(f"  .. {line}", file=out, flush=True)

    return show
