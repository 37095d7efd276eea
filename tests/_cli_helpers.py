"""Running the CLI in the tests, and reading what it leaves in its folder: ``cli`` (a fresh interpreter),
``cli_here`` (this process), the study and the MLflow runs of a folder, the first operator trial a search process
runs, the shortened timing protocol of the tune tests."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
from mlflow.tracking import MlflowClient

import syno_automl

# Where the syno_automl under test lives (the installed package in CI, the source tree with PYTHONPATH=.):
# the CLI subprocesses must import the same one.
PACKAGE_ROOT = Path(syno_automl.__file__).resolve().parents[1]
optuna.logging.set_verbosity(optuna.logging.WARNING)


def cli_env() -> dict[str, str]:
    """This environment, with the syno_automl under test first on PYTHONPATH (for a CLI subprocess)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def cli(cwd: Path, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "syno_automl.cli", *args], cwd=cwd, env=cli_env(),
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


def read_study(cwd: Path) -> optuna.Study:
    """The study, read without creating tables (never races a worker that is creating them)."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{cwd / 'syno.db'}", skip_table_creation=True,
                                         skip_compatibility_check=True,
                                         engine_kwargs={"connect_args": {"timeout": 60}})
    return optuna.load_study(study_name="syno", storage=storage)


def read_runs(cwd: Path) -> list:
    """The MLflow runs of the folder's store (experiment ``syno-automl``)."""
    client = MlflowClient(f"sqlite:///{cwd / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syno-automl")
    return list(client.search_runs([exp.experiment_id], max_results=1000))


def wait_for_running_operator_trial(proc: subprocess.Popen, cwd: Path, log: Path, seconds: float = 400,
                                   settle: float = 1.0) -> optuna.trial.FrozenTrial:
    """The first operator trial the search process runs (the baseline finished, its MLflow run open), `settle`
    seconds after it is seen; AssertionError with the log's tail if the process ends or stalls first."""
    deadline = time.time() + seconds
    study = None   # loaded once (~20 ms of CPU each time), then read at each look (~1 ms)
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        if not (cwd / "mlflow.db").exists():  # created once the study exists
            continue
        try:
            study = study or read_study(cwd)
            trials = study.get_trials(deepcopy=False)
        except Exception:  # noqa: BLE001 -- the store is being written: look again
            continue
        running = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING
                   and not t.user_attrs.get("syno.baseline") and "syno.mlflow_run_id" in t.user_attrs]
        if running and trials[0].state.is_finished():
            time.sleep(settle)  # inside training
            return running[0]
    raise AssertionError("no operator trial ran:\n" + log.read_text()[-3000:])


def quick_timing_protocol():
    """The shortened timing protocol of the tune tests (``measure.PROTOCOL`` replaced by it): 1 warm-up, 5 repeats
    of 3 runs, at least 5 ms each."""
    from syno_automl import measure

    return measure.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
