"""MLflow tracking against a real sqlite store in tmp_path."""
from __future__ import annotations

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
    assert data.data.tags["syno.hash"] == op.hash and data.data.tags["syno.depth"] == str(op.depth)
    # tags, not params (Compare's axes are the params that differ); the primitives in forward order, as `show`'s
    assert data.data.tags["syno.primitives"] == " | ".join(reversed(op.primitives))
    assert "syno.hash" not in data.data.params and "syno.primitives" not in data.data.params
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
    # (tracking/graph.py says why once per process, in one line: tests/tracking/test_graph_render.py)
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


def test_a_copied_store_reads_its_own_artifacts_with_nothing_repaired(tmp_path, monkeypatch):
    """Artifact locations are recorded relative to the database's folder: a copy of a search folder, the original
    gone, opened by MLflow alone (nothing of ours run in the copy), reads the copy's artifacts."""
    import shutil

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    monkeypatch.chdir(first)
    tracker = SearchTracker("sqlite:///mlflow.db")
    run = tracker.trial_run(tracker.study_run("s", {}), "s", 1, None, label="x")
    run.log_text("hello\n", "kernels/cpu.eager/a.txt")
    run.log_json({"a": 1}, "latency/cpu.json")
    shutil.copytree(first, second)
    shutil.rmtree(first)
    monkeypatch.chdir(second)
    client = MlflowClient(f"sqlite:///{second / 'mlflow.db'}")
    assert client.get_experiment(tracker.experiment_id).artifact_location == "mlruns"
    assert client.get_run(run.run_id).info.artifact_uri == f"mlruns/{run.run_id}/artifacts"
    got = client.download_artifacts(run.run_id, "kernels/cpu.eager/a.txt", str(tmp_path / "got"))
    assert Path(got).read_text() == "hello\n"
    assert '"a": 1' in Path(client.download_artifacts(run.run_id, "latency/cpu.json", str(tmp_path))).read_text()


def test_a_store_with_absolute_artifact_paths_is_made_relative(tmp_path, monkeypatch):
    """A store written before the rule (MLflow's absolute paths, here those of a folder since moved) is rewritten
    when it is opened; our own reads resolve the paths against the store's folder from any working folder."""
    old = tmp_path / "old"
    old.mkdir()
    client = MlflowClient(f"sqlite:///{old / 'mlflow.db'}")
    experiment = client.create_experiment("syno-automl", artifact_location=(tmp_path / "gone" / "mlruns").as_uri())
    run_id = client.create_run(experiment).info.run_id
    assert client.get_run(run_id).info.artifact_uri.startswith((tmp_path / "gone").as_uri())
    monkeypatch.chdir(tmp_path)  # not the store's folder
    tracker = SearchTracker(f"sqlite:///{old / 'mlflow.db'}")
    assert tracker.client.get_run(run_id).info.artifact_uri == f"mlruns/{run_id}/artifacts"
    tracker.run(run_id).log_text("x", "note.txt")
    assert (old / "mlruns" / run_id / "artifacts" / "note.txt").read_text() == "x"
    assert [a.path for a in tracker.run(run_id).artifacts().list_artifacts()] == ["note.txt"]


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


def test_a_long_tag_is_kept_whole_and_a_long_param_is_cut(tracker):
    """A verdict line (a tag of the study run) with a tie's criterion and the timing's conditions ran past the params'
    500 characters, and was stored cut (the final stage's test found it): tags keep MLflow's own 8,000."""
    op = tiny_space().sample(1, seed=0)[0]
    run = tracker.trial_run(tracker.study_run("s", {}), "s", 1, op)
    verdict = "fastest operator within 1 pp: " + "x" * 1200 + " (decided by fewer FLOPs)"
    run.set_tags({"syno.final_verdict": verdict})
    run.log_params({"search.note": "y" * 1200})
    data = tracker.client.get_run(run.run_id).data
    assert data.tags["syno.final_verdict"] == verdict
    assert data.params["search.note"] == "y" * 497 + "..."
