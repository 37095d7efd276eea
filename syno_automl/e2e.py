"""Deprecated home of the model-level latency measure: everything now lives in :mod:`syno_automl.measure`
(:mod:`~syno_automl.measure.relax`, :mod:`~syno_automl.measure.model`, :mod:`~syno_automl.measure.substitution`).
Kept for one release so that nothing outside breaks."""

from __future__ import annotations

from syno_automl.measure.model import compare_models, model_latency
from syno_automl.measure.relax import CUSTOM_CONVERTERS, export_program, export_relax, prepare_relax, relax_run
from syno_automl.measure.substitution import measure_substitution, model_metrics, substituted_models

__all__ = ["export_relax", "prepare_relax", "relax_run", "model_latency", "compare_models", "measure_substitution",
           "model_metrics", "substituted_models", "export_program", "CUSTOM_CONVERTERS"]
