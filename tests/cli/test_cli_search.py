"""The CLI end to end in a temp dir (real SQLite study, real MLflow store), failures, resume, SIGKILL."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from _cli_helpers import cli, cli_env, cli_here, read_runs, read_study, wait_for_running_operator_trial
from mlflow.tracking import MlflowClient


@pytest.mark.slow
def test_search_show_export_report_resume(tmp_path, monkeypatch):
    # the smallest final stage that still compares (1 finalist, 2 seeds of 1 epoch; a 100 pp margin): the CLI's
    # one run of it, its verdict the last line (the default stage re-trains 4 models x 3 seeds x 2 epochs)
    # in this process (cli_here): the libraries imported once for the suite's worker, not again (~10 s a search)
    out = cli_here(tmp_path, "search", "--trials", "3", "--epochs", "1", "--timeout", "30", "--finalists", "1",
              "--final-seeds", "2", "--final-epochs", "1", "--final-margin", "1")
    assert "trial 0   baseline" in out.stdout and "done in" in out.stdout
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(("fastest operator within 100 pp of the baseline: ", "no operator within 100 pp")), last
    recorded = read_study(tmp_path).user_attrs["syno.final"]
    assert recorded["verdict"] == last and recorded["seeds"] == 2
    assert (tmp_path / "syno.db").exists() and (tmp_path / "mlflow.db").exists() and (tmp_path / "mlruns").is_dir()
    study = read_study(tmp_path)
    trials = study.trials
    assert len(trials) == 4 and trials[0].user_attrs["syno.baseline"]
    assert all(t.state.is_finished() for t in trials)
    hashes = [t.user_attrs["syno.hash"] for t in trials[1:]]
    assert len(set(hashes)) == 3
    runs = {r.info.run_name: r for r in read_runs(tmp_path)}
    parent = runs["study-syno"]
    for t in trials:
        label = "baseline" if t.number == 0 else t.user_attrs["syno.hash"]
        run = runs[f"trial-{t.number}-{label}"]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.params["search.model"] == "pointwise_cnn"  # the default model
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert run.info.status == "FINISHED"
            assert run.data.metrics["val_acc"] == pytest.approx(t.values[0])  # (val_acc, cost_ratio) by default
            assert {"flops", "num_params", "flops_ratio"} <= set(run.data.metrics)
        if t.number:
            # MLflow resolves the store's relative artifact paths against the working folder
            monkeypatch.chdir(tmp_path)
            client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
            names = {a.path for a in client.list_artifacts(run.info.run_id)}
            assert {"operator.json", "operator.py", "graph.dot", "graph.svg"} <= names
            assert run.data.tags["syno.hash"] == t.user_attrs["syno.hash"]
    assert parent.info.status == "FINISHED"

    shown = cli_here(tmp_path, "show", hashes[0][:8])
    assert hashes[0] in shown.stdout and "primitives" in shown.stdout
    cli_here(tmp_path, "export", hashes[0][:8], "-o", "op.py")
    namespace: dict = {}
    exec(compile((tmp_path / "op.py").read_text(), "op.py", "exec"), namespace)
    report = cli_here(tmp_path, "report")
    assert (tmp_path / "report" / "pareto_flops.png").stat().st_size > 1000
    assert (tmp_path / "report" / "pareto_flops.svg").exists() and "canonical rate" in report.stdout

    again = cli_here(tmp_path, "search", "--trials", "4", "--epochs", "1", "--timeout", "30", "--resume",
                "--finalists", "0")  # the resumed trials are checked here; the final stage ran above
    assert "1 trial to run" in again.stdout
    trials = read_study(tmp_path).trials
    assert len(trials) == 5 and len({t.user_attrs["syno.hash"] for t in trials[1:]}) == 4
    assert len([r for r in read_runs(tmp_path) if r.data.tags.get("syno.role") == "study"]) == 1


def test_cli_errors_are_one_line(tmp_path):
    bad = cli(tmp_path, "search", "--bogus", check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--bogus" in bad.stderr
    missing = cli_here(tmp_path, "show", "abcd", check=False)
    assert missing.returncode == 1 and missing.stderr.strip().splitlines() == [missing.stderr.strip()]
    assert "syno.db" in missing.stderr
    negative = cli_here(tmp_path, "search", "--trials", "-1", check=False)
    assert negative.returncode == 1 and "--trials" in negative.stderr
    optuna.create_study(study_name="syno", storage=f"sqlite:///{tmp_path / 'syno.db'}")
    exists = cli(tmp_path, "search", "--trials", "1", "--tracking-uri", "none", check=False)
    assert exists.returncode == 1 and "--resume" in exists.stderr
    assert len(exists.stderr.strip().splitlines()) == 1
    debug = cli_here(tmp_path, "search", "--trials", "1", "--tracking-uri", "none", "--debug", check=False)
    assert "Traceback" in debug.stderr


def test_a_budget_that_empties_the_space_is_refused_before_anything_trains(tmp_path):
    """Once the baseline trained first, and then every operator trial failed with 'all 0 operators of the space
    are evaluated'. Now the search checks the space before it opens a study: one line, naming the budget and the
    settings that move it, and no study, run or trial left behind."""
    empty = cli_here(tmp_path, "search", "--flops-ratio", "1e-9", "--trials", "2", "--epochs", "1", check=False)
    assert empty.returncode == 1, empty.stdout + empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1
    assert "max_flops=" in empty.stderr and "empties the space" in empty.stderr and "--flops-ratio" in empty.stderr
    assert "trial 0" not in empty.stdout and "baseline" not in empty.stdout
    assert optuna.study.get_all_study_summaries(f"sqlite:///{tmp_path / 'syno.db'}") == []
    assert not (tmp_path / "mlflow.db").exists()


def test_enumerate(tmp_path):
    out = cli_here(tmp_path, "enumerate", "--time-limit", "1")  # the limit bounds the enumeration and the sampling
    assert "canonical rate" in out.stdout and "| depth | nodes | final |" in out.stdout


@pytest.mark.slow
def test_nan_loss_and_unbuildable_operator_are_recorded(tmp_path, monkeypatch):
    from syno_automl.config import SearchConfig
    from syno_automl.study import prepare, run_search
    from syno_automl.study.opening import open_study

    monkeypatch.chdir(tmp_path)
    config = SearchConfig(trials=2, epochs=1, lr=1e12, storage=f"sqlite:///{tmp_path / 's.db'}",
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", trial_timeout=None,
                          opening="none")  # the enqueued operator is the first operator trial
    study = open_study(config, prepare(config))
    study.enqueue_trial({}, user_attrs={"syno.operator": json.dumps({"format": "syno-operator/1", "hash": "0" * 16,
                                                                     "path": ["0" * 16], "space": {}})})
    result = run_search(config, resume=True, out=None)
    trials = result.study.trials
    assert len(trials) == 3 and all(t.state == optuna.trial.TrialState.FAIL for t in trials)  # 2 operator trials
    reasons = {t.number: t.user_attrs["syno.failure"] for t in trials}
    assert "OperatorFormatError" in reasons[1]
    assert all("NonFiniteLossError" in r or "nan" in r.lower() for n, r in reasons.items() if n != 1), reasons
    client = MlflowClient(config.tracking_uri)
    for t in trials:
        run = client.get_run(t.user_attrs["syno.mlflow_run_id"])
        assert run.info.status == "FAILED" and run.data.tags["syno.failure"]
        assert "failure.txt" in {a.path for a in client.list_artifacts(run.info.run_id)}


@pytest.mark.slow
def test_worker_killed_mid_trial_is_retried_with_the_same_operator(tmp_path):
    # operators of at most 6 primitives and the planned speed objective: the tree's decisions in a fraction of the
    # time, no whole-model timing before each trial (the retry is what is checked, not the space or the speed)
    small = ["--max-depth", "6", "--speed-objective", "planned"]
    args = ["search", "--trials", "3", "--epochs", "1", "--timeout", "40", "--heartbeat", "1", *small]
    log = open(tmp_path / "worker1.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", *args], cwd=tmp_path, env=cli_env(),
                            stdout=log, stderr=subprocess.STDOUT)
    victim = None
    try:
        victim = wait_for_running_operator_trial(proc, tmp_path, tmp_path / "worker1.log", settle=0.0)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None and victim is None:
            proc.kill()
        proc.wait()
        log.close()
    assert victim is not None, ("the worker finished or stalled before a trial could be interrupted:\n"
                                + (tmp_path / "worker1.log").read_text()[-3000:])
    finished_before = {t.number: t for t in read_study(tmp_path).trials if t.state.is_finished()}
    time.sleep(3.5)  # past the grace period (3 heartbeats)
    # the resumed worker in this process (cli_here): the first one's kill is what needs a process of its own
    cli_here(tmp_path, "search", "--trials", "3", "--epochs", "1", "--timeout", "40", "--heartbeat", "1", *small,
             "--resume", "--finalists", "0")  # the retry is what is checked here
    trials = read_study(tmp_path).trials
    lost = trials[victim.number]
    assert lost.state == optuna.trial.TrialState.FAIL
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == victim.number)
    assert retry.user_attrs["syno.hash"] == victim.user_attrs["syno.hash"]
    assert retry.state.is_finished() and retry.state != optuna.trial.TrialState.RUNNING
    for number, before in finished_before.items():  # nothing finished was lost
        assert trials[number].state == before.state and trials[number].values == before.values
    ops = [t for t in trials if not t.user_attrs.get("syno.baseline") and t.number != victim.number]
    assert len(ops) == 3 and all(t.state.is_finished() for t in trials)
    runs = {r.info.run_id: r for r in read_runs(tmp_path)}
    assert runs[victim.user_attrs["syno.mlflow_run_id"]].info.status == "FAILED"
    assert "worker lost" in runs[victim.user_attrs["syno.mlflow_run_id"]].data.tags["syno.failure"]
    for before in finished_before.values():
        run = runs[before.user_attrs["syno.mlflow_run_id"]]
        assert run.info.status in ("FINISHED", "FAILED", "KILLED")
        if before.state == optuna.trial.TrialState.COMPLETE:
            assert run.data.metrics["val_acc"] == pytest.approx(before.values[0])
