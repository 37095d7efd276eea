"""``syno-automl tune`` end to end, in process (``syno_automl.cli.main``): a real one-trial study (SQLite, MLflow),
then the operator's latency over every layer it replaces, untuned and with 2 MetaSchedule trials (and the report's
label of the tuned figure), an unreachable RPC target and bad arguments. The timing protocol is shortened
(``latency.PROTOCOL``, read by the command)."""

from __future__ import annotations

import dataclasses
import json
import re

import optuna
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")

from _cli_helpers import quick_timing_protocol  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from syno_automl import measure as lat  # noqa: E402
from syno_automl.cli import build_parser, main  # noqa: E402
from syno_automl.tracking import SearchTracker  # noqa: E402

pytestmark = pytest.mark.tvm
QUICK = quick_timing_protocol()
TVM_METRICS = {"latency_ms.llvm", "speedup.llvm", "baseline_latency_ms.llvm"}
INDUCTOR_METRICS = {"latency_ms.inductor-llvm", "speedup.inductor-llvm", "baseline_latency_ms.inductor-llvm"}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A study with the baseline and one operator trial (pointwise_cnn on digits, 1 epoch): (folder, CLI storage
    options, operator hash, MLflow run id of its trial, number of replaced layers)."""
    folder = tmp_path_factory.mktemp("tune")
    common = ["--storage", f"sqlite:///{folder / 'syno.db'}", "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)  # anything written to the working directory stays in the temp folder
        assert main(["search", "--trials", "1", "--epochs", "1", "--timeout", "0", "--quiet", "--finalists", "0",
                     *common]) == 0
    study = _study(common)
    trial = next(t for t in study.trials if not t.user_attrs.get("syno.baseline") and t.user_attrs.get("syno.hash"))
    n = len(study.user_attrs["syno.space"]["mappings"])
    return folder, common, trial.user_attrs["syno.hash"], trial.user_attrs["syno.mlflow_run_id"], n


def _study(common):
    return optuna.load_study(study_name="syno", storage=common[1])


def _artifact(common, run_id, tmp_path, name="latency/llvm.json"):
    store = SearchTracker(common[3])  # from any folder: MLflow's client would resolve the relative paths from here
    path = store.run(run_id).artifacts().download_artifacts(name, str(tmp_path))
    with open(path) as f:
        return json.load(f)


def test_untuned_default_schedules_are_labelled(searched, capsys, monkeypatch, tmp_path):
    folder, common, op_hash, run_id, n = searched
    monkeypatch.setattr(lat, "PROTOCOL", QUICK)
    rc = main(["tune", op_hash[:8], "--tune-trials", "0", "--work-dir", str(tmp_path / "ms"), *common])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0].startswith(f"operator {op_hash}") and lat.UNTUNED in lines[0]
    layers = [line for line in lines if line.startswith("layer ")]
    assert len(layers) == n >= 1
    for i, line in enumerate(layers):
        assert line.startswith(f"layer {i} (conv2d ") and f"[{lat.UNTUNED}]" in line, line
        assert "inductor: operator" in line and "missing" not in line, line
    (total,) = [line for line in lines if line.startswith("total over")]
    assert f"total over {n} layers on llvm [{lat.UNTUNED}]" in total and "inductor: operator" in total

    entry = _study(common).user_attrs["syno.latency"][op_hash]["llvm"]
    assert entry["tuned_trials"] == 0 and entry["schedules"] == lat.UNTUNED
    assert entry["latency_ms"] > 0 and entry["baseline_ms"] > 0
    assert entry["speedup"] == pytest.approx(entry["baseline_ms"] / entry["latency_ms"])
    assert entry["inductor_ms"] > 0 and entry["inductor_speedup"] > 0

    metrics = MlflowClient(common[3]).get_run(run_id).data.metrics
    assert TVM_METRICS | INDUCTOR_METRICS <= set(metrics)
    assert metrics["latency_ms.llvm"] == pytest.approx(entry["latency_ms"])
    assert metrics["baseline_latency_ms.llvm"] == pytest.approx(entry["baseline_ms"])
    assert metrics["speedup.llvm"] == pytest.approx(entry["speedup"])
    assert metrics["latency_ms.inductor-llvm"] == pytest.approx(entry["inductor_ms"])

    summary = _artifact(common, run_id, tmp_path)
    assert summary["operator"] == op_hash and summary["device"] == "llvm" and summary["tuned_trials"] == 0
    assert summary["schedules"] == lat.UNTUNED and summary["protocol"] == dataclasses.asdict(QUICK)
    assert len(summary["layers"]) == n
    for layer in summary["layers"]:
        for kernel in (layer["operator"], layer["baseline"]):
            assert kernel["median_ms"] > 0 and kernel["iqr_ms"] >= 0 and kernel["tuned_trials"] == 0
            assert "untuned" in kernel["note"]
        assert layer["inductor"]["operator"]["median_ms"] > 0 and layer["notes"] == {}
    assert summary["latency_ms"] == pytest.approx(sum(layer["operator"]["median_ms"] for layer in summary["layers"]))


def test_two_tuning_trials(searched, capsys, monkeypatch, tmp_path):
    folder, common, op_hash, run_id, n = searched
    monkeypatch.setattr(lat, "PROTOCOL", QUICK)
    monkeypatch.setenv("SYNO_MS_RUNNER", "inprocess")  # no worker process per candidate
    rc = main(["tune", op_hash, "--tune-trials", "2", "--seconds", "120", "--no-inductor",
               "--work-dir", str(tmp_path / "ms"), *common])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "MetaSchedule, 2 trials per kernel, 120 s budget per kernel" in out.splitlines()[0]
    layers = [line for line in out.splitlines() if line.startswith("layer ")]
    assert len(layers) == n
    for line in layers:
        assert "[MetaSchedule-tuned: " in line and lat.UNTUNED not in line and "inductor" not in line, line
    assert (tmp_path / "ms" / "database_tuning_record.json").exists()

    entry = _study(common).user_attrs["syno.latency"][op_hash]["llvm"]
    assert entry["tuned_trials"] == 2 and entry["schedules"].startswith("MetaSchedule")
    assert not any(k.startswith("inductor") for k in entry)
    metrics = MlflowClient(common[3]).get_run(run_id).data.metrics
    assert TVM_METRICS <= set(metrics)
    assert metrics["latency_ms.llvm"] == pytest.approx(entry["latency_ms"])
    assert metrics["speedup.llvm"] == pytest.approx(entry["speedup"])

    summary = _artifact(common, run_id, tmp_path)
    assert summary["tuned_trials"] == 2 and summary["trials"] == 2 and summary["seconds"] == 120
    for layer in summary["layers"]:
        assert layer["operator"]["tuned_trials"] >= 1 and layer["baseline"]["tuned_trials"] >= 1, layer
        assert layer["operator"]["median_ms"] > 0 and "inductor" not in layer

    # the report labels the tuned figure, in its latency table and its plot (one tuning serves both checks)
    number = next(t.number for t in _study(common).trials if t.user_attrs.get("syno.hash") == op_hash)
    assert main(["report", "--out", str(tmp_path / "report"), *common]) == 0
    latency = (tmp_path / "report" / "report.md").read_text().split("## Latency", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in latency.splitlines() if line.startswith(f"| {number} | {op_hash} | llvm |"))
    row = [cell.strip() for cell in line.strip().strip("|").split("|")]
    assert row[3] == "-" and row[4].endswith("(tune: tuned 2 trials)"), row
    assert re.match(rf"{entry['latency_ms']:.4g} ms vs ", row[4]), row
    assert "tune: tuned 2 trials" in (tmp_path / "report" / "pareto_latency_llvm.svg").read_text()


def test_unreachable_target_fails_in_one_line(searched, capsys):
    folder, common, op_hash, run_id, n = searched
    for trials in ("0", "2"):
        rc = main(["tune", op_hash, "--target", "rpc:nobody@127.0.0.1:1", "--tune-trials", trials,
                   "--work-dir", str(folder / "ms"), *common])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and len(err) == 1, err
        assert err[0].startswith("syno-automl: error: no latency on rpc-nobody") and "unreachable" in err[0], err
    assert "rpc-nobody" not in _study(common).user_attrs.get("syno.latency", {}).get(op_hash, {})
    assert not any("rpc-nobody" in k for k in MlflowClient(common[3]).get_run(run_id).data.metrics)


def test_bad_arguments(searched, capsys):
    folder, common, op_hash, run_id, n = searched
    assert main(["tune", op_hash, "--tune-trials", "-1", *common]) == 1
    assert "--tune-trials" in capsys.readouterr().err
    assert main(["tune", op_hash, "--target", "rpc:bad", *common]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad RPC target" in err[0]
    args = build_parser().parse_args(["tune", "abcd"])
    assert args.tune_trials == 32 and not args.no_inductor and args.work_dir is None
