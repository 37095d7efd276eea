"""What a person reads a search in, in MLflow's UI: the command that serves a local store (from the store's folder,
where its relative artifact locations resolve: syno_automl.tracking.store), the address that opens a study's runs in
the experiment's runs table (MLflow 3 opens on its GenAI pages, where a search's runs do not show), and text that a
run's description (Markdown) renders as written.

The address opens a *saved view* of the runs table (:class:`RunsView`): MLflow 3.17's experiment page reads the
URL parameter ``viewStateShareKey=<key>``, looks up the experiment tag ``mlflow.sharedViewState.<key>`` and applies
the state it holds -- an envelope ``{"name", "createdAt", "updatedAt", "state"}`` whose ``state`` is the JSON of
the search facets (``searchFilter``, ``orderByKey``, ``orderByAsc``) and the table's UI state (``selectedColumns``,
``columnOrder``, ``columnWidths``, ``runsHiddenMode``; the shape of MLflow's own *Share* / *Save as new view*). A
URL alone cannot choose columns; the view also appears by its name in the page's views menu.

Example:
    >>> escape_markdown("SPLIT C_in -> [s^-1*C_in, s]")
    'SPLIT C\\\\_in -> \\\\[s^-1\\\\*C\\\\_in, s\\\\]'
    >>> runs_url("http://127.0.0.1:5000", "1").endswith("/#/experiments/1/runs?workflowType=machine_learning")
    True
    >>> view = RunsView("syno", "val_acc", speed_target="cpu.eager")
    >>> view.key, view.columns()[:2]
    ('syno-syno', ['metrics.`val_acc`', 'metrics.`final_val_acc`'])
    >>> runs_url("http://127.0.0.1:5000", "1", view, shared=True).endswith("&viewStateShareKey=syno-syno")
    True
"""
from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from syno_automl import vocabulary as V
from syno_automl.tracking.store import store_database

__all__ = ["UI_PORT", "RunsView", "escape_markdown", "runs_url", "ui_hint"]

UI_PORT = 5000
# CommonMark's markup characters that can act inside a line (a backslash makes each literal); '<' (HTML) and '&'
# (entities) become entities (MLflow's renderer keeps a backslash before them)
_MARKUP = set("\\`*_[]~|#!")
_ENTITIES = {"&": "&amp;", "<": "&lt;"}
SHARED_VIEW_TAG = "mlflow.sharedViewState."   # MLflow 3's experiment tag prefix of a shared / saved runs view
SHARE_KEY_PARAM = "viewStateShareKey"         # the runs page's URL parameter naming one
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,200}")


@dataclass(frozen=True)
class RunsView:
    """The runs table of one study as the search's address opens it: the study's trials and final-stage runs (all
    its runs but its own parent run: ``syno-automl reevaluate``'s too), listed flat, sorted by `objective` (best
    first: the final-stage runs, which hold ``final_<objective>`` instead, after the trials), with the columns
    `objective`, ``final_<objective>``, ``speedup.<speed_target>`` (trials measured on it and final runs) and
    ``cost_ratio``."""
    study: str
    objective: str
    maximize: bool = True
    speed_target: str | None = None   # the final stage's speed target (the resolved --target)

    @property
    def key(self) -> str:
        """``syno-<study>``, the same for every search of the study (a name with other characters: a digest
        beside what is left of it), so that a resumed search or another worker writes the same view again."""
        key = f"syno-{self.study}"
        if _PLAIN_KEY.fullmatch(key):
            return key
        return (f"syno-{re.sub(r'[^A-Za-z0-9_.-]', '_', self.study)[:120]}-"
                f"{hashlib.sha256(self.study.encode()).hexdigest()[:10]}")

    def columns(self) -> list[str]:
        """The table's metric columns, in MLflow's column keys (``metrics.`name```), in their order."""
        names = [self.objective, V.final_metric(self.objective)]
        if self.speed_target:
            names.append(V.speedup_metric(self.speed_target))
        return [f"metrics.`{n}`" for n in [*names, "cost_ratio"]]

    def facets(self) -> dict[str, Any]:
        """The search facets: which runs and in what order."""
        return {"searchFilter": f"tags.`{V.TAG_STUDY}` = '{self.study}' and tags.`{V.TAG_ROLE}` != 'study'",
                "orderByKey": f"metrics.`{self.objective}`", "orderByAsc": not self.maximize}

    def state(self) -> dict[str, Any]:
        """The view's whole state as MLflow's runs page reads it: the facets and the table's UI state (the columns
        wide enough for their names, every run shown in the charts too, not the first 10)."""
        columns = self.columns()
        return {**self.facets(), "selectedColumns": columns, "columnOrder": columns,
                "columnWidths": {c: max(120, 30 + 8 * (len(c) - len("metrics.``"))) for c in columns},
                "runsHiddenMode": "SHOW_ALL"}

    def tag(self, now_ms: int | None = None) -> tuple[str, str]:
        """The experiment tag (key, value) that holds the view: MLflow's saved-view envelope around the state."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        envelope = {"name": f"syno-automl study {self.study}: trials and final stage", "createdAt": now_ms,
                    "updatedAt": now_ms, "state": json.dumps(self.state())}
        return SHARED_VIEW_TAG + self.key, json.dumps(envelope)

    def share(self, client: Any, experiment_id: str) -> bool:
        """Writes the view's tag on the experiment; False when the store refused it (the address then carries the
        facets alone: the runs, sorted, without the columns)."""
        try:
            client.set_experiment_tag(experiment_id, *self.tag())
        except Exception:  # noqa: BLE001 -- a store that refuses a tag: the plainer address
            return False
        return True


def escape_markdown(text: str) -> str:
    """`text` as Markdown that renders as `text` (``s^-1*H`` is not the start of an emphasis, ``[...]`` no link)."""
    return "".join(_ENTITIES.get(c) or ("\\" + c if c in _MARKUP else c) for c in text)


def runs_url(base: str, experiment_id: str, view: RunsView | None = None, shared: bool = False) -> str:
    """The experiment's runs page in MLflow 3's *Model training* view; with `view`, that view of the study's runs:
    `shared` (its tag written: :meth:`RunsView.share`), by its key -- the table with its columns -- else by its
    facets in the URL (the runs and their order; columns chosen by hand)."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    if view is None:
        return url
    if shared:   # facets in the URL beside the key would make the page ignore the shared view
        return url + f"&{SHARE_KEY_PARAM}={quote(view.key, safe='')}"
    return url + "".join(f"&{k}={quote(str(v).lower() if isinstance(v, bool) else v, safe='')}"
                         for k, v in view.facets().items())


def ui_hint(tracking_uri: str, experiment_id: str | None, view: RunsView | None = None, shared: bool = False,
            port: int = UI_PORT) -> str:
    """The line a search ends its MLflow part with: how to serve the store -- a local one from its own folder, where
    MLflow's UI finds the artifacts (started elsewhere it shows "No Artifacts Recorded") -- and the address of the
    study's runs (:func:`runs_url`; none without `experiment_id`)."""
    db = store_database(tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        return f"MLflow: {runs_url(tracking_uri, experiment_id, view, shared)}" if experiment_id \
            else f"MLflow: {tracking_uri}"
    if db is None:
        return f"MLflow: mlflow ui --backend-store-uri {tracking_uri} --host 127.0.0.1 --port {port}"
    serve = (f"cd {shlex.quote(str(db.parent))} && mlflow ui --backend-store-uri sqlite:///{shlex.quote(db.name)} "
             f"--host 127.0.0.1 --port {port}")
    where = "   (in the search's folder: the UI finds the artifacts from there)"
    if experiment_id is None:
        return f"MLflow: {serve}{where}"
    return f"MLflow: {serve}{where}, then open {runs_url(f'http://127.0.0.1:{port}', experiment_id, view, shared)}"
