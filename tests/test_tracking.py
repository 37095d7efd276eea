"""MLflow tracking against a real sqlite store in tmp_path."""
from __future__ import annotations

import os
from pathlib import Path

import lightning as L
import pytest
from _syno_helpers import tiny_space
from mlflow.tracking import MlflowClient

from syno_automl.search.callbacks import EpochMetricsLogger
from syno_automl.tracking import SearchTracker, artifact_location_for, render_svg


@pytest.fixture
def tracker(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return SearchTracker("sqlite:///mlflow.db")


def _artifacts(client: MlflowClient, run_id: str) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id)}


def test_parent_and_child_runs_with_operator_artifacts(tracker, tmp_path):
    op = tiny_space().sample(1, seed=0)[0]
    parent = tracker.study_run("s1", {"model": "small_cnn", "epochs": 2})
    assert tracker.study_run("s1", {}) == parent  # found again (resume, other workers)
    run = tracker.trial_run(parent, "s1", 3, op, settings={"epochs": 2})
    run.log_metrics({"val_acc": 0.5}, step=1)
    run.log_metrics({"val_acc": 0.75, "flops": 123.0, "params": 7, "flops_ratio": 0.25, "bad": float("nan")},
                    step=2)
    run.finish("FINISHED")
    client = tracker.client
    data = client.get_run(run.run_id)
    assert data.info.run_name == f"trial-3-{op.hash}" and data.info.status == "FINISHED"
    assert data.data.tags["mlflow.parentRunId"] == parent
    assert data.data.params["syno.hash"] == op.hash and data.data.params["syno.depth"] == str(op.depth)
    assert "REDUCE" in data.data.params["syno.primitives"] or data.data.params["syno.primitives"]
    assert data.data.params["search.epochs"] == "2"
    assert [m.value for m in client.get_metric_history(run.run_id, "val_acc")] == [0.5, 0.75]
    assert "bad" not in data.data.metrics
    assert _artifacts(client, run.run_id) == {"operator.json", "operator.py", "graph.dot", "graph.svg"}
    assert (tmp_path / "mlruns").is_dir()  # artifacts beside mlflow.db
    found = tracker.find_trial_run("s1", hash=op.hash[:6])
    assert found is not None and found.info.run_id == run.run_id
    local = Path(client.download_artifacts(run.run_id, "operator.py", str(tmp_path)))
    namespace: dict = {}
    exec(compile(local.read_text(), "operator.py", "exec"), namespace)  # standalone: imports torch only


def test_failure_is_recorded(tracker):
    parent = tracker.study_run("s2", {})
    run = tracker.trial_run(parent, "s2", 1, None, label="no-operator")
    run.log_failure("NonFiniteLossError: training loss became nan", "traceback ...")
    run.finish("FAILED")
    data = tracker.client.get_run(run.run_id)
    assert data.info.status == "FAILED" and "nan" in data.data.tags["syno.failure"]
    assert "failure.txt" in _artifacts(tracker.client, run.run_id)


def test_svg_skipped_without_graphviz(monkeypatch):
    # (graph_render says why once per process, in one line: tests/test_graph_render.py)
    assert render_svg("digraph { a -> b }").lstrip().startswith("<?xml")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert render_svg("digraph { a -> b }") is None


def test_the_same_relative_uri_from_two_folders_reaches_two_stores(tmp_path, monkeypatch):
    """MLflow caches a store per URI string: `sqlite:///mlflow.db` opened from a second folder must not reach the
    first folder's database (a search run after another in one process, a test after another in one worker)."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        tracker = SearchTracker("sqlite:///mlflow.db")
        tracker.study_run(name, {})
        assert tracker.tracking_uri == f"sqlite:///{tmp_path / name / 'mlflow.db'}"
        assert (tmp_path / name / "mlflow.db").is_file()
        assert [r.data.tags["syno.study"] for r in tracker.client.search_runs([tracker.experiment_id])] == [name]


def test_artifact_location():
    assert artifact_location_for("sqlite:///x/mlflow.db").endswith("/x/mlruns")
    assert artifact_location_for("http://127.0.0.1:5000") is None


def test_epoch_metrics_from_a_trainer(tracker):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 2)

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_acc", (self.layer(x).argmax(1) == y).float().mean())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8)
    run = tracker.trial_run(tracker.study_run("s3", {}), "s3", 0, None)
    L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, num_sanity_val_steps=0, callbacks=[EpochMetricsLogger(run)]).fit(
        Tiny(), data, data)
    assert [m.step for m in tracker.client.get_metric_history(run.run_id, "val_acc")] == [1, 2, 3]
    assert len(tracker.client.get_metric_history(run.run_id, "train_loss")) == 3
