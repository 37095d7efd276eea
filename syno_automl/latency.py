"""Deprecated home of the layer-level latency measure: everything now lives in :mod:`syno_automl.measure` (and the
printed lines in :mod:`syno_automl.cli_text`). Kept for one release so that nothing outside breaks."""

from __future__ import annotations

from syno_automl.cli_text import layer_line, total_line
from syno_automl.measure import *  # noqa: F401,F403
from syno_automl.measure import __all__ as _measure_all
from syno_automl.measure.baseline import baseline_kernel as _baseline_kernel  # noqa: F401  (old private names)
from syno_automl.measure.baseline import baseline_module as _baseline_module  # noqa: F401
from syno_automl.measure.database import records_for as _records_for  # noqa: F401
from syno_automl.measure.kernel import apply_record as _apply_record  # noqa: F401
from syno_automl.measure.result import summarize as _summarize  # noqa: F401
from syno_automl.measure.target import TargetSpec as _TargetSpec  # noqa: F401
from syno_automl.measure.target import tracker_unreachable  # noqa: F401

__all__ = [*_measure_all, "layer_line", "total_line"]


def __getattr__(name: str):
    """The MetaSchedule pieces need tvm: imported on first use, as before."""
    if name in ("run_tuning", "make_runner", "MS_EVALUATOR", "tuning_failure_note"):
        from syno_automl.measure import metaschedule

        return getattr(metaschedule, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
