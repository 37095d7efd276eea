"""What a user does around a search, through the real CLI: interrupt, resume, inspect, export."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from test_cli_search import _env, _runs, _study, cli

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _wait_for_running_operator_trial(proc: subprocess.Popen, cwd: Path, log: Path, seconds: float = 400):
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        if not (cwd / "mlflow.db").exists():
            continue
        try:
            trials = _study(cwd).trials
        except Exception:
            continue
        running = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING
                   and not t.user_attrs.get("syno.baseline") and "syno.mlflow_run_id" in t.user_attrs]
        if running and trials[0].state.is_finished():
            time.sleep(1.0)  # inside training
            return running[0]
    raise AssertionError("no operator trial ran:\n" + log.read_text()[-3000:])


@pytest.mark.slow
def test_ctrl_c_fails_the_running_trial_and_exits_130(tmp_path):
    args = ["search", "--trials", "3", "--epochs", "20", "--timeout", "0", "--heartbeat", "60"]
    log_path = tmp_path / "search.log"
    with open(log_path, "w") as log, open(tmp_path / "stderr.log", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", *args], cwd=tmp_path, env=_env(),
                                stdout=log, stderr=err)
        try:
            victim = _wait_for_running_operator_trial(proc, tmp_path, log_path)
            finished_before = {t.number: t for t in _study(tmp_path).trials if t.state.is_finished()}
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stderr = (tmp_path / "stderr.log").read_text()
    assert rc == 130, (rc, stderr[-2000:], log_path.read_text()[-2000:])
    assert stderr.strip().splitlines()[-1] == "syno-automl: interrupted", stderr[-2000:]
    trials = _study(tmp_path).trials
    lost = trials[victim.number]
    assert lost.state == optuna.trial.TrialState.FAIL  # at once: no heartbeat window, no orphan
    assert "interrupted" in lost.user_attrs["syno.failure"]
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    for number, before in finished_before.items():  # finished trials untouched
        assert trials[number].state == before.state and trials[number].values == before.values
    runs = {r.info.run_id: r for r in _runs(tmp_path)}
    run = runs[lost.user_attrs["syno.mlflow_run_id"]]
    assert run.info.status == "KILLED" and "interrupted" in run.data.tags["syno.failure"]
    parent = next(r for r in runs.values() if r.data.tags.get("syno.role") == "study")
    assert parent.info.status == "KILLED"
    base = runs[trials[0].user_attrs["syno.mlflow_run_id"]]
    assert base.info.status == "FINISHED"
