"""What a person reads a search in, in MLflow's UI: the command that serves a local store (from the store's folder,
where its relative artifact locations resolve: syno_automl.tracking.store), the address that opens a study's trials
in the experiment's runs page (MLflow 3 opens on its GenAI pages, where a search's runs do not show), and text that a
run's description (Markdown) renders as written.

Example:
    >>> escape_markdown("SPLIT C_in -> [s^-1*C_in, s]")
    'SPLIT C\\\\_in -> \\\\[s^-1\\\\*C\\\\_in, s\\\\]'
    >>> runs_url("http://127.0.0.1:5000", "1").endswith("/#/experiments/1/runs?workflowType=machine_learning")
    True
"""
from __future__ import annotations

import shlex
from urllib.parse import quote

from syno_automl import vocabulary as V
from syno_automl.tracking.store import store_database

__all__ = ["UI_PORT", "escape_markdown", "runs_url", "ui_hint"]

UI_PORT = 5000
# CommonMark's markup characters that can act inside a line (a backslash makes each literal); '<' (HTML) and '&'
# (entities) become entities (MLflow's renderer keeps a backslash before them)
_MARKUP = set("\\`*_[]~|#!")
_ENTITIES = {"&": "&amp;", "<": "&lt;"}


def escape_markdown(text: str) -> str:
    """`text` as Markdown that renders as `text` (``s^-1*H`` is not the start of an emphasis, ``[...]`` no link)."""
    return "".join(_ENTITIES.get(c) or ("\\" + c if c in _MARKUP else c) for c in text)


def runs_url(base: str, experiment_id: str, study: str | None = None, objective: str | None = None,
             maximize: bool = True) -> str:
    """The experiment's runs page in MLflow 3's *Model training* view; with `study`, that study's trial runs alone
    (listed flat, not under the study's run) in the chart view, a bar per trial for every metric, the trials sorted
    by `objective` (best first)."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    if study is not None:
        wanted = f"tags.`{V.TAG_STUDY}` = '{study}' and tags.`{V.TAG_ROLE}` = 'trial'"
        url += f"&searchFilter={quote(wanted, safe='')}&compareRunsMode=CHART"
    if objective is not None:
        url += f"&orderByKey={quote(f'metrics.`{objective}`', safe='')}&orderByAsc={'false' if maximize else 'true'}"
    return url


def ui_hint(tracking_uri: str, experiment_id: str | None, study: str | None = None, objective: str | None = None,
            maximize: bool = True, port: int = UI_PORT) -> str:
    """The line a search ends its MLflow part with: how to serve the store -- a local one from its own folder, where
    MLflow's UI finds the artifacts (started elsewhere it shows "No Artifacts Recorded") -- and the address of the
    study's trials (:func:`runs_url`; none without `experiment_id`)."""
    db = store_database(tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        return f"MLflow: {runs_url(tracking_uri, experiment_id, study, objective, maximize)}" if experiment_id \
            else f"MLflow: {tracking_uri}"
    if db is None:
        return f"MLflow: mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port {port}"
    serve = (f"cd {shlex.quote(str(db.parent))} && mlflow ui --backend-store-uri sqlite:///{shlex.quote(db.name)} "
             f"--host 127.0.0.1 --port {port}")
    where = "   (in the search's folder: the UI finds the artifacts from there)"
    if experiment_id is None:
        return f"MLflow: {serve}{where}"
    trials = runs_url(f"http://127.0.0.1:{port}", experiment_id, study, objective, maximize)
    return f"MLflow: {serve}{where}, then open {trials}"
