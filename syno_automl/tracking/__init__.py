"""MLflow tracking of a search: the study's and trials' runs (runs), the store's folder and relative artifact paths
(store), a new local store copied from an empty one MLflow made once (store_template), the operator's graph drawn as
SVG (graph), what MLflow's UI is pointed at and shown (ui).
"""
from __future__ import annotations

from syno_automl import lazy_attributes

_NAMES = {
    "SearchTracker": "runs",
    "TrialRun": "runs",
    "DEFAULT_TRACKING_URI": "runs",
    "render_svg": "runs",
    "artifact_location_for": "runs",
    "absolute_tracking_uri": "runs",
    "TRIAL_RUN_SETTINGS": "runs",
    "latency_metrics": "runs",
    "log_latency": "runs",
    "ARTIFACT_FOLDER": "store",
    "store_database": "store",
    "store_folder": "store",
    "make_artifact_paths_relative": "store",
    "artifact_folder": "store",
    "local_path": "store",
    "escape_markdown": "ui",
    "RunsView": "ui",
    "runs_url": "ui",
    "ui_hint": "ui",
}
__all__ = list(_NAMES)

__getattr__ = lazy_attributes(__name__, _NAMES)
