"""TVM latency measured by the search itself (--latency): per trial, logged to MLflow, plotted by the report."""
from __future__ import annotations

import json

import optuna
import pytest
from mlflow.tracking import MlflowClient

from syno_automl import measure as latency
from syno_automl.config import SearchConfig
from syno_automl.study import run_search

pytestmark = [pytest.mark.tvm, pytest.mark.slow]
optuna.logging.set_verbosity(optuna.logging.WARNING)
QUICK = latency.TimingProtocol(warmup=1, number=2, repeat=3, min_repeat_ms=1)


@pytest.fixture(autouse=True)
def quick_protocol(monkeypatch):
    """The search times with latency.PROTOCOL; a shorter one keeps this test quick."""
    monkeypatch.setattr(latency, "PROTOCOL", QUICK)


def test_search_measures_latency_per_trial(tmp_path, monkeypatch):
    # operators of at most 6 primitives, no whole-model timing before each trial (planned): the latency per trial
    # is what is checked
    config = SearchConfig(trials=2, epochs=1, storage=f"sqlite:///{tmp_path / 's.db'}", heartbeat=None,
                          tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", trial_timeout=None,
                          latency_targets=("llvm", "rpc:nobody@127.0.0.1:1"), latency_margin=None, finalists=0,
                          max_depth=6, speed_objective="planned")
    study = run_search(config, out=None).study
    ops = [t for t in study.trials if not t.user_attrs.get("syno.baseline") and t.state.name == "COMPLETE"]
    assert ops, [(t.state.name, t.user_attrs.get("syno.failure")) for t in study.trials]
    client = MlflowClient(config.tracking_uri)
    monkeypatch.chdir(tmp_path)  # MLflow resolves the store's relative artifact paths against the working folder
    for t in ops:
        entry = t.user_attrs["syno.latency"]
        assert entry["llvm"]["latency_ms"] > 0 and entry["llvm"]["baseline_ms"] > 0
        assert entry["llvm"]["speedup"] == pytest.approx(entry["llvm"]["baseline_ms"] / entry["llvm"]["latency_ms"])
        assert entry["llvm"]["tuned_trials"] == 0 and "untuned" in entry["llvm"]["schedules"]
        assert entry["rpc-nobody"]["latency_ms"] is None  # unreachable: missing, the trial still completed
        run = client.get_run(t.user_attrs["syno.mlflow_run_id"])
        assert {"latency_ms.llvm", "speedup.llvm", "baseline_latency_ms.llvm"} <= set(run.data.metrics)
        assert "latency_ms.rpc-nobody" not in run.data.metrics
        assert "unreachable" in run.data.tags["syno.note.latency_ms.rpc-nobody"]
        local = client.download_artifacts(run.info.run_id, "latency/llvm.json", str(tmp_path))
        with open(local) as f:
            summary = json.load(f)
        assert [layer["sizes"]["N"] for layer in summary["layers"]] == [1, 1]  # timed at batch 1
    from syno_automl.report import latency_devices, latency_points

    assert "llvm" in latency_devices(study)
    points = latency_points(study, "llvm")
    assert sum(p.baseline for p in points) == 1 and len(points) == len(ops) + 1


def test_latency_margin_skips_trials_far_from_the_baseline(tmp_path):
    """Paper Algorithm 1: only operators within the margin are measured (one epoch: none is within 0 of it)."""
    config = SearchConfig(trials=1, epochs=1, storage=f"sqlite:///{tmp_path / 's.db'}", heartbeat=None,
                          tracking_uri=None, trial_timeout=None, latency_targets=("llvm",), latency_margin=0.0,
                          milestones={}, finalists=0, max_depth=6, speed_objective="planned")
    study = run_search(config, out=None).study
    base, op = study.trials[0], study.trials[1]
    assert op.state.name == "COMPLETE"
    if op.values[0] < base.values[0]:  # (val_acc, cost_ratio) by default
        assert "syno.latency" not in op.user_attrs
    else:  # within the margin after all: then it was measured
        assert "syno.latency" in op.user_attrs
