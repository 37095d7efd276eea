"""MLflow tracking of a search: one parent run per study, one child run per trial (``trial-<n>-<hash>``).

Child runs hold the search settings as params, the tags ``syno.hash``, ``syno.depth`` and ``syno.primitives``; the
metrics ``val_acc``/``val_loss`` per epoch, ``flops``, ``params``, ``flops_ratio`` and, when measured,
``latency_ms.<device>``/``speedup.<device>``; the artifacts ``operator.json``, ``operator.py`` (standalone
PyTorch), ``graph.dot`` and ``graph.svg`` (the operator drawn: input, weights, primitives, output, legend). A
failed trial keeps its reason in the tag ``syno.failure`` and in ``failure.txt``. Runs are addressed by explicit
ids (MlflowClient), never through MLflow's global active run, so several workers and threads can log at once.

Example:
    >>> tracker = SearchTracker("sqlite:///mlflow.db")                       # doctest: +SKIP
    >>> parent = tracker.study_run("syno", {"model": "small_cnn"})           # doctest: +SKIP
    >>> run = tracker.trial_run(parent, "syno", 1, op)                        # doctest: +SKIP
    >>> run.log_metrics({"val_acc": 0.97}, step=1); run.finish("FINISHED")   # doctest: +SKIP
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.interrupt import Deferring
from syno_automl.measure.result import latency_metrics
from syno_automl.space import Operator
from syno_automl.tracking.graph import render_svg
from syno_automl.tracking.store import (
    absolute_tracking_uri,
    artifact_folder,
    artifact_location_for,
    make_artifact_paths_relative,
)
from syno_automl.tracking.store_template import seed_new_store

__all__ = ["SearchTracker", "TrialRun", "DEFAULT_TRACKING_URI", "render_svg", "artifact_location_for",
           "absolute_tracking_uri", "TRIAL_RUN_SETTINGS", "latency_metrics", "log_latency"]

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "syno-automl"
_log = logging.getLogger(__name__)
_PARAM_LIMIT = 500
# MLflow's own limit of a tag's value (mlflow.utils.validation.MAX_TAG_VAL_LENGTH): a verdict line with a tie's
# criterion and the timing's conditions runs past the params' 500 characters, and was cut there
_TAG_LIMIT = 8000
# the settings a trial run repeats from its study run (which has them all): enough to tell studies apart in a
# runs table of several studies; the other search.* params would be identical on every child run
TRIAL_RUN_SETTINGS = ("task", "model", "dataset")


def _clean(value: Any, limit: int = _PARAM_LIMIT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TrialRun:
    """One trial's child run. Logging never stops a search: MLflow errors are logged as warnings.

    Example:
        >>> run = SearchTracker().trial_run(parent_id, "syno", 4, op)   # doctest: +SKIP
        >>> run.log_metrics({"val_acc": 0.97}, step=3); run.finish()     # doctest: +SKIP
    """

    def __init__(self, client: Any, run_id: str, tracking_uri: str = "") -> None:
        self.client = client
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self._repository: Any = None

    def artifacts(self) -> Any:
        """The run's MLflow artifact repository, a relative location resolved against the store's folder
        (tracking.store; MLflow's client would resolve it against the working folder)."""
        if self._repository is None:
            from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

            uri = self.client.get_run(self.run_id).info.artifact_uri
            # (the tracking URI: a server's mlflow-artifacts:/ locations are served by that server, as MLflow's client
            # resolves them)
            repository = get_artifact_repository(artifact_folder(self.tracking_uri, uri),
                                                 tracking_uri=self.tracking_uri or None)
            self._repository = Deferring(repository)
        return self._repository

    def _safe(self, what: str, fn: Any, *args: Any, **kw: Any) -> None:
        try:
            fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 -- tracking must not fail a trial
            _log.warning("MLflow: could not %s for run %s: %s", what, self.run_id, e)

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, _clean(v)) for k, v in params.items() if v is not None]
        self._safe("log params", self.client.log_batch, self.run_id, params=items)

    def log_metrics(self, metrics: Mapping[str, float | None], step: int | None = None) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step or 0) for k, v in metrics.items()
                 if v is not None and math.isfinite(float(v))]
        if items:
            self._safe("log metrics", self.client.log_batch, self.run_id, metrics=items)

    def log_series(self, name: str, points: Sequence[tuple[int, float]]) -> None:
        """One metric at many steps (a loss curve), in batches of MLflow's 1000-metric limit."""
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(name, float(v), now, int(step)) for step, v in points if math.isfinite(float(v))]
        for start in range(0, len(items), 1000):
            self._safe("log metrics", self.client.log_batch, self.run_id, metrics=items[start:start + 1000])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._safe("set tags", self.client.log_batch, self.run_id,
                   tags=[RunTag(k, _clean(v, _TAG_LIMIT)) for k, v in tags.items() if v is not None])

    def log_file(self, path: str | Path, folder: str | None = None) -> None:
        """The file `path` as the artifact ``<folder>/<its name>``."""
        self._safe(f"write {Path(path).name}", lambda: self.artifacts().log_artifact(str(path), folder))

    def log_text(self, text: str, name: str) -> None:
        """`text` as the artifact `name` (``kernels/cpu.eager/operator.py``: subfolders allowed)."""
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / Path(name).name
            path.write_text(text, encoding="utf-8")
            parent = str(Path(name).parent)
            self.log_file(path, None if parent == "." else parent)

    def log_torch(self, obj: Any, name: str) -> None:
        """`obj` saved with torch.save as the artifact `name` (e.g. trained weights)."""
        import tempfile

        import torch

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            torch.save(obj, path)
            self.log_file(path)

    def log_json(self, data: Any, name: str) -> None:
        """`data` as the JSON artifact `name` (as MLflow's log_dict: indent 2, values JSON lacks become strings)."""
        self.log_text(json.dumps(data, indent=2, default=str), name)

    def log_operator(self, op: Operator) -> None:
        """The tags syno.hash, syno.depth and syno.primitives (in forward order, as `syno-automl show` lists them)
        and the artifacts operator.json, operator.py, graph.dot/.svg. Tags, not params: MLflow's Compare plots the
        params that differ between runs; the strings would be its axes, and the depth, which a baseline lacks, its
        first axis even where every operator's was the same."""
        self.set_tags({V.TAG_HASH: op.hash, V.TAG_DEPTH: str(op.depth),
                       V.TAG_PRIMITIVES: " | ".join(reversed(op.primitives))})
        self.log_text(op.to_json(), "operator.json")
        try:
            source = op.to_source()
        except Exception as e:  # noqa: BLE001 -- a missing operator.py must not fail a trial
            source = f"# operator.py could not be generated: {type(e).__name__}: {e}\n"
        self.log_text(source, "operator.py")
        dot = op.graphviz()
        self.log_text(dot, "graph.dot")
        svg = render_svg(dot)
        if svg is not None:
            self.log_text(svg, "graph.svg")

    def log_kernels(self, op: Operator, targets: Sequence[str], mapping: Any = 0) -> None:
        """The code `op` runs on each of `targets` (syno_automl.kernels: ``cpu.eager``, ``cuda.compiled``,
        ``tvm.llvm`` ...) as artifacts ``kernels/<target>/<file>``, so the run shows what it compiles to on each
        device; a target whose code cannot be produced gets ``kernels/<target>/unavailable.txt`` saying why."""
        from syno_automl.kernels import kernel_sources

        for target in targets:
            try:
                files = kernel_sources(op, target, mapping)
            except Exception as e:  # noqa: BLE001 -- never stops a search: the reason is the artifact
                files = {f"{target}/unavailable.txt": f"{type(e).__name__}: {e}\n"}
            for name, text in files.items():
                self.log_text(text, f"kernels/{name}")

    def log_failure(self, reason: str, details: str | None = None) -> None:
        self.set_tags({V.FAILURE: reason})
        self.log_text(reason + ("\n\n" + details if details else "") + "\n", "failure.txt")

    def finish(self, status: str = "FINISHED") -> None:
        """Status: FINISHED, FAILED or KILLED (pruned)."""
        self._safe("end the run", self.client.set_terminated, self.run_id, status)


class SearchTracker:
    """The MLflow side of a search: finds or creates the experiment, the study's parent run, trial runs.

    Example:
        >>> tracker = SearchTracker("sqlite:///mlflow.db")   # doctest: +SKIP
        >>> tracker.find_trial_run("syno", hash="0123456789abcdef")   # doctest: +SKIP
    """

    def __init__(self, tracking_uri: str = DEFAULT_TRACKING_URI, experiment: str = DEFAULT_EXPERIMENT) -> None:
        from mlflow.tracking import MlflowClient

        # MLflow caches a store per URI string: a relative sqlite:///mlflow.db opened again from another folder would
        # reach the first folder's database, so the URI is made absolute here
        tracking_uri = absolute_tracking_uri(tracking_uri)
        self.tracking_uri = tracking_uri
        seed_new_store(tracking_uri)   # a new local store: a copy of an empty one, not MLflow's 1.6 s of migrations
        # every call waits out a Ctrl-C: one landing inside a write would leave SQLite locked (interrupt.py)
        self.client = Deferring(MlflowClient(tracking_uri=tracking_uri))
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            self.experiment_id = found.experiment_id
        else:
            try:
                self.experiment_id = self.client.create_experiment(
                    experiment, artifact_location=artifact_location_for(tracking_uri))
            except Exception:  # created by another worker meanwhile
                found = self.client.get_experiment_by_name(experiment)
                if found is None:
                    raise
                self.experiment_id = found.experiment_id
        # MLflow made a new experiment's location absolute; a store written before the rule has absolute paths too
        make_artifact_paths_relative(tracking_uri)

    def _search(self, filter_string: str, max_results: int = 1000) -> list[Any]:
        return list(self.client.search_runs([self.experiment_id], filter_string=filter_string,
                                            max_results=max_results, order_by=["attributes.start_time ASC"]))

    def study_run(self, study: str, settings: Mapping[str, Any]) -> str:
        """The study's parent run id (created once, found again on --resume or by another worker)."""
        runs = self._search(f"tags.`{V.TAG_STUDY}` = '{study}' and tags.`{V.TAG_ROLE}` = 'study'")
        if runs:
            run_id = runs[0].info.run_id
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        run = self.client.create_run(self.experiment_id, run_name=f"study-{study}",
                                     tags={V.TAG_STUDY: study, V.TAG_ROLE: "study"})
        self.run(run.info.run_id).log_params({f"search.{k}": v for k, v in settings.items()})
        return run.info.run_id

    def trial_run(self, parent_id: str, study: str, number: int, op: Operator | None,
                  settings: Mapping[str, Any] | None = None, tags: Mapping[str, Any] | None = None,
                  label: str | None = None) -> TrialRun:
        """A new child run ``trial-<n>-<hash>`` (``trial-<n>-baseline`` for the original layers)."""
        label = label or (op.hash if op is not None else "baseline")
        run = self.client.create_run(
            self.experiment_id, run_name=f"trial-{number}-{label}",
            tags={"mlflow.parentRunId": parent_id, V.TAG_STUDY: study, V.TAG_ROLE: "trial",
                  V.TAG_TRIAL: str(number), V.HASH: label, **{k: str(v) for k, v in (tags or {}).items()}})
        trial_run = self.run(run.info.run_id)
        if settings:
            trial_run.log_params({f"search.{k}": v for k, v in settings.items()})
        if op is not None:
            trial_run.log_operator(op)
        return trial_run

    def find_trial_run(self, study: str | None = None, *, number: int | None = None,
                       hash: str | None = None) -> Any | None:
        """The latest trial run of a study matching a trial number or an operator hash (prefix allowed)."""
        clauses = [f"tags.`{V.TAG_ROLE}` = 'trial'"]
        if study is not None:
            clauses.append(f"tags.`{V.TAG_STUDY}` = '{study}'")
        if number is not None:
            clauses.append(f"tags.`{V.TAG_TRIAL}` = '{number}'")
        if hash is not None:
            clauses.append(f"tags.`{V.TAG_HASH}` LIKE '{hash}%'")
        runs = self._search(" and ".join(clauses))
        return runs[-1] if runs else None

    def reevaluation_run(self, study: str, op: Operator | None, search_run: Any | None, number: int | None,
                         settings: Mapping[str, Any]) -> TrialRun:
        """A run re-training a found operator (None: the baseline), linked to its search trial by tags."""
        label = op.hash if op is not None else "baseline"
        tags = {V.TAG_ROLE: "reevaluation", V.TAG_STUDY: study, V.HASH: label}
        if number is not None:
            tags[V.TAG_SEARCH_TRIAL] = str(number)
        if search_run is not None:
            tags[V.TAG_SEARCH_RUN_ID] = search_run.info.run_id
            tags["mlflow.note.content"] = (f"Re-evaluation of {label}, trial {number} "
                                           f"(run {search_run.info.run_id}) of study {study}.")
        run = self.client.create_run(self.experiment_id,
                                     run_name=f"reeval-{label}-{settings.get('dataset', '')}", tags=tags)
        trial_run = self.run(run.info.run_id)
        trial_run.log_params({f"search.{k}": v for k, v in settings.items()})
        if op is not None:
            trial_run.log_operator(op)
        return trial_run

    def final_runs(self, study: str, running: bool = False) -> list[Any]:
        """The final stage's runs of `study` (tag syno.role = final), oldest first; `running`: those still RUNNING."""
        status = " and attributes.status = 'RUNNING'" if running else ""
        return self._search(f"tags.`{V.TAG_STUDY}` = '{study}' and tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'{status}",
                            max_results=50000)

    def reevaluation_runs(self, study: str) -> list[Any]:
        """The runs of ``syno-automl reevaluate`` for `study`, oldest first (read by ``syno-automl report``)."""
        return self._search(f"tags.`{V.TAG_STUDY}` = '{study}' and tags.`{V.TAG_ROLE}` = 'reevaluation'",
                            max_results=50000)

    def run(self, run_id: str) -> TrialRun:
        return TrialRun(self.client, run_id, self.tracking_uri)


# --- latency: the ONE place the MLflow names of a latency measurement are made (search and `tune` alike) ---


def log_latency(run: TrialRun, result: Mapping[str, Any], extra: Mapping[str, Any] | None = None,
                role: str = "operator") -> list[str]:
    """Log a ``measure_layers`` result to ``run``: the metrics of :func:`latency_metrics`, the tags
    ``syno.schedules.<device>`` (how both sides were scheduled: the label every speedup carries) and
    ``syno.note.<metric>`` (why a value is missing), the artifact ``latency/<device>.json`` (the summary, with
    ``extra`` first; operators only). Returns the names of the metrics logged."""
    from syno_automl.measure.result import slug

    metrics = {k: v for k, v in latency_metrics(result["devices"], role).items() if v is not None}
    run.log_metrics(metrics)
    tags = {V.schedule_label_tag(dev): s.get("schedules") for dev, s in result["devices"].items()}
    if role == "operator":
        tags.update({V.note_tag(k): v for k, v in result.get("notes", {}).items()})
    run.set_tags(tags)
    if role == "operator":  # the baseline's figures are already in every operator's artifact
        for dev, summary in result["devices"].items():
            run.log_json({**(extra or {}), **summary}, f"latency/{slug(dev)}.json")
    return sorted(metrics)
