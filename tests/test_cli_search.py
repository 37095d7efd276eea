"""The CLI end to end in a temp dir (real SQLite study, real MLflow store), failures, resume, SIGKILL."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

import syno_automl

# Where the syno_automl under test lives (the installed package in CI, the source tree with PYTHONPATH=.):
# the CLI subprocesses must import the same one.
PACKAGE_ROOT = Path(syno_automl.__file__).resolve().parents[1]
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def cli(cwd: Path, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "syno_automl.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"syno-automl {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def cli_here(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`syno-automl ARGS` in this process, in `cwd` (what `cli` does, without starting an interpreter and importing
    the libraries again: seconds per call); for the commands that read a study. What needs a fresh interpreter
    (a search's own process, a signal, a kill, the imports a command makes) uses `cli`."""
    import contextlib
    import io
    import logging

    from syno_automl.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else 2
        finally:
            logging.disable(logging.NOTSET)  # -q disables logging process-wide
    done = subprocess.CompletedProcess(["syno-automl", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"syno-automl {' '.join(args)} failed ({code}):\n{done.stdout}\n{done.stderr}")
    return done


def _study(cwd: Path) -> optuna.Study:
    """The study, read without creating tables (never races a worker that is creating them)."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{cwd / 'syno.db'}", skip_table_creation=True,
                                         skip_compatibility_check=True,
                                         engine_kwargs={"connect_args": {"timeout": 60}})
    return optuna.load_study(study_name="syno", storage=storage)


def _runs(cwd: Path) -> list:
    client = MlflowClient(f"sqlite:///{cwd / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syno-automl")
    return list(client.search_runs([exp.experiment_id], max_results=1000))


@pytest.mark.slow
def test_search_show_export_report_resume(tmp_path, monkeypatch):
    # the smallest final stage that still compares (1 finalist, 2 seeds of 1 epoch; a 100 pp margin): the CLI's
    # one run of it, its verdict the last line (the default stage re-trains 4 models x 3 seeds x 2 epochs)
    out = cli(tmp_path, "search", "--trials", "3", "--epochs", "1", "--timeout", "30", "--finalists", "1",
              "--final-seeds", "2", "--final-epochs", "1", "--final-margin", "1")
    assert "trial 0   baseline" in out.stdout and "done in" in out.stdout
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(("fastest operator within 100 pp of the baseline: ", "no operator within 100 pp")), last
    recorded = _study(tmp_path).user_attrs["syno.final"]
    assert recorded["verdict"] == last and recorded["seeds"] == 2
    assert (tmp_path / "syno.db").exists() and (tmp_path / "mlflow.db").exists() and (tmp_path / "mlruns").is_dir()
    study = _study(tmp_path)
    trials = study.trials
    assert len(trials) == 4 and trials[0].user_attrs["syno.baseline"]
    assert all(t.state.is_finished() for t in trials)
    hashes = [t.user_attrs["syno.hash"] for t in trials[1:]]
    assert len(set(hashes)) == 3
    runs = {r.info.run_name: r for r in _runs(tmp_path)}
    parent = runs["study-syno"]
    for t in trials:
        label = "baseline" if t.number == 0 else t.user_attrs["syno.hash"]
        run = runs[f"trial-{t.number}-{label}"]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.params["search.model"] == "small_cnn"
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert run.info.status == "FINISHED"
            assert run.data.metrics["val_acc"] == pytest.approx(t.values[0])  # (val_acc, cost_ratio) by default
            assert {"flops", "num_params", "flops_ratio"} <= set(run.data.metrics)
        if t.number:
            monkeypatch.chdir(tmp_path)  # MLflow resolves the store's relative artifact paths against the working folder
            client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
            names = {a.path for a in client.list_artifacts(run.info.run_id)}
            assert {"operator.json", "operator.py", "graph.dot", "graph.svg"} <= names
            assert run.data.params["syno.hash"] == t.user_attrs["syno.hash"]
    assert parent.info.status == "FINISHED"

    shown = cli_here(tmp_path, "show", hashes[0][:8])
    assert hashes[0] in shown.stdout and "primitives" in shown.stdout
    cli_here(tmp_path, "export", hashes[0][:8], "-o", "op.py")
    namespace: dict = {}
    exec(compile((tmp_path / "op.py").read_text(), "op.py", "exec"), namespace)
    report = cli_here(tmp_path, "report")
    assert (tmp_path / "report" / "pareto_flops.png").stat().st_size > 1000
    assert (tmp_path / "report" / "pareto_flops.svg").exists() and "canonical rate" in report.stdout

    again = cli(tmp_path, "search", "--trials", "4", "--epochs", "1", "--timeout", "30", "--resume",
                "--finalists", "0")  # the resumed trials are checked here; the final stage ran above
    assert "1 trials to run" in again.stdout
    trials = _study(tmp_path).trials
    assert len(trials) == 5 and len({t.user_attrs["syno.hash"] for t in trials[1:]}) == 4
    assert len([r for r in _runs(tmp_path) if r.data.tags.get("syno.role") == "study"]) == 1


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
    out = cli(tmp_path, "enumerate", "--time-limit", "1")  # the limit bounds the enumeration and the sampling
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


def _wait_for_running_operator_trial(proc: subprocess.Popen, cwd: Path, log: Path, seconds: float = 400,
                                    settle: float = 1.0) -> optuna.trial.FrozenTrial:
    """The first operator trial the search process runs (the baseline finished, its MLflow run open), `settle`
    seconds after it is seen; AssertionError with the log's tail if the process ends or stalls first."""
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        if not (cwd / "mlflow.db").exists():  # created once the study exists
            continue
        try:
            trials = _study(cwd).trials
        except Exception:
            continue
        running = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING
                   and not t.user_attrs.get("syno.baseline") and "syno.mlflow_run_id" in t.user_attrs]
        if running and trials[0].state.is_finished():
            time.sleep(settle)  # inside training
            return running[0]
    raise AssertionError("no operator trial ran:\n" + log.read_text()[-3000:])


@pytest.mark.slow
def test_worker_killed_mid_trial_is_retried_with_the_same_operator(tmp_path):
    args = ["search", "--trials", "3", "--epochs", "1", "--timeout", "40", "--heartbeat", "1"]
    log = open(tmp_path / "worker1.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", *args], cwd=tmp_path, env=_env(),
                            stdout=log, stderr=subprocess.STDOUT)
    victim = None
    try:
        victim = _wait_for_running_operator_trial(proc, tmp_path, tmp_path / "worker1.log", settle=0.0)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None and victim is None:
            proc.kill()
        proc.wait()
        log.close()
    assert victim is not None, ("the worker finished or stalled before a trial could be interrupted:\n"
                                + (tmp_path / "worker1.log").read_text()[-3000:])
    finished_before = {t.number: t for t in _study(tmp_path).trials if t.state.is_finished()}
    time.sleep(3.5)  # past the grace period (3 heartbeats)
    cli(tmp_path, "search", "--trials", "3", "--epochs", "1", "--timeout", "40", "--heartbeat", "1", "--resume",
        "--finalists", "0")  # the retry is what is checked here
    trials = _study(tmp_path).trials
    lost = trials[victim.number]
    assert lost.state == optuna.trial.TrialState.FAIL
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == victim.number)
    assert retry.user_attrs["syno.hash"] == victim.user_attrs["syno.hash"]
    assert retry.state.is_finished() and retry.state != optuna.trial.TrialState.RUNNING
    for number, before in finished_before.items():  # nothing finished was lost
        assert trials[number].state == before.state and trials[number].values == before.values
    ops = [t for t in trials if not t.user_attrs.get("syno.baseline") and t.number != victim.number]
    assert len(ops) == 3 and all(t.state.is_finished() for t in trials)
    runs = {r.info.run_id: r for r in _runs(tmp_path)}
    assert runs[victim.user_attrs["syno.mlflow_run_id"]].info.status == "FAILED"
    assert "worker lost" in runs[victim.user_attrs["syno.mlflow_run_id"]].data.tags["syno.failure"]
    for number, before in finished_before.items():
        run = runs[before.user_attrs["syno.mlflow_run_id"]]
        assert run.info.status in ("FINISHED", "FAILED", "KILLED")
        if before.state == optuna.trial.TrialState.COMPLETE:
            assert run.data.metrics["val_acc"] == pytest.approx(before.values[0])
