"""One Ctrl-C (SIGINT) or SIGTERM always stops a search, exit status 130 / 143, with nothing left RUNNING in the
study or in MLflow, and `--resume` completes it; a second signal stops it at once; `show` flags a RUNNING trial
whose worker is gone (issue 34, items 1 and 2).

The signal is sent at chosen points, by the process to itself, from code the test puts there (no timing): inside
a finalizer run by the collection after each trial (where a KeyboardInterrupt is printed as "Exception
ignored" and lost), inside the sampler's decision (between trials), inside Lightning's training, inside the final
stage. The searches run in this process (`syno_automl.cli.main`), training replaced by a fixed value
(study.training.train_operator) except where Lightning's own handling is under test; real SQLite Optuna storage
and a real MLflow tracking store."""
from __future__ import annotations

import functools
import gc
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

import syno_automl.study.training as training
from syno_automl import vocabulary as V
from syno_automl.cli import main
from syno_automl.interrupt import STOP_REASONS
from syno_automl.search.sampler import SynoSampler
from syno_automl.speed import sessions
from syno_automl.speed.paired import PairedProtocol
from syno_automl.study import finalists
from syno_automl.study.lost_trials import STALE, stale_trials

optuna.logging.set_verbosity(optuna.logging.WARNING)

SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")]
TRIALS = 2
# the default search (Pareto objective, known opening, Hyperband), small: 1 epoch, no final stage unless asked; the
# planned speed objective (no model timed before each trial: no signal is sent there) and operators of at most 6
# primitives (the tree's decisions in a fraction of the time) -- a search a third as long, the same stops
COMMON = ["--trials", str(TRIALS), "--epochs", "1", "--seed", "0", "--finalists", "0", "--speed-objective", "planned",
          "--max-depth", "6", "-q"]
FINAL = ["--finalists", "1", "--final-seeds", "1", "--final-epochs", "1"]


@pytest.fixture(autouse=True)
def _signals_as_in_a_terminal():
    """SIGINT raises KeyboardInterrupt and SIGTERM kills, as in a terminal, even where pytest runs with SIGINT
    ignored (a background job of a shell without job control); restored afterwards."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.fixture(autouse=True)
def _final_stage_timed_briefly(monkeypatch):
    """The final stage times its finalists by the paired protocol (up to 40 pairs of blocks, most of a stage whose
    training is a fixed value); no signal is sent there and its figures are not read here: two pairs."""
    brief = PairedProtocol(warmup=1, min_block_s=0.005, min_pairs=2, max_pairs=2, batch_pairs=1)
    monkeypatch.setattr(finalists, "measure_final", functools.partial(sessions.measure_final, protocol=brief))


def _train(hook=None):
    """train_operator's stand-in: a fixed value (operators: half the replaced layers' cost, so that they can be
    finalists); `hook(trial)` first (trial None: the final stage)."""
    def train(context, trial, run, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        if trial is not None and not trial.user_attrs.get(V.BASELINE):
            trial.set_user_attr(V.COST_RATIO, 0.5)
        if hook is not None:
            hook(trial)
        return 0.5 + 0.01 * (trial.number if trial is not None else 0)
    return train


def _search(*args: str) -> int:
    return main(["search", *COMMON, *args])


def _study(folder: Path) -> optuna.Study:
    return optuna.load_study(study_name="syno", storage=f"sqlite:///{folder / 'syno.db'}")


def _running(folder: Path) -> tuple[list[str], list[str]]:
    """(RUNNING trials, as study#number, of every study in the folder's syno.db: the search's and its fidelity
    companion; names of RUNNING MLflow runs) of the search in `folder`."""
    with sqlite3.connect(folder / "syno.db") as con:
        trials = [f"{name}#{number}" for name, number in con.execute(
            "SELECT s.study_name, t.number FROM trials t JOIN studies s ON s.study_id = t.study_id "
            "WHERE t.state = 'RUNNING'")]
    runs: list[str] = []
    if (folder / "mlflow.db").exists():
        client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
        ids = [e.experiment_id for e in client.search_experiments()]
        runs = [r.info.run_name for r in client.search_runs(ids, filter_string="attributes.status = 'RUNNING'")]
    return trials, runs


def _resume_completes(folder: Path, monkeypatch, *args: str) -> optuna.Study:
    """`--resume` (training the fixed value) exits 0, leaves nothing RUNNING, and the study holds its operator
    trials."""
    monkeypatch.setattr(training, "train_operator", _train())
    assert main(["search", "--resume", "-q", *args]) == 0
    assert _running(folder) == ([], [])
    study = _study(folder)
    done = [t for t in study.trials if not t.user_attrs.get(V.BASELINE)
            and t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(done) >= TRIALS
    assert any(t.user_attrs.get(V.BASELINE) and t.state == TrialState.COMPLETE for t in study.trials)
    return study


class _SignalOnCollect:
    """Cyclic garbage whose finalizer sends `signum` to this process: Python runs the handler inside it, so that
    the KeyboardInterrupt is raised in ``__del__``, where Python prints "Exception ignored" and drops it (what
    Lightning's Profiler.__del__ did to a Ctrl-C). Records where the collection ran."""

    def __init__(self, signum: int, where: list[str]) -> None:
        self.signum, self.where = signum, where
        self.cycle = self   # only a collection frees it

    def __del__(self) -> None:
        self.where.append(sys._getframe(1).f_code.co_name)   # who collected: the search, after a trial
        signal.raise_signal(self.signum)


@pytest.fixture
def collected_garbage(monkeypatch):
    """No automatic collection (the finalizer runs in the collection the search makes after each trial, not earlier);
    unraisable exceptions (those of finalizers) recorded instead of printed."""
    lost: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: lost.append(unraisable.exc_value))
    gc.collect()
    gc.disable()
    yield lost
    gc.enable()


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_a_signal_lost_in_a_finalizer_after_a_trial_still_stops_the_search(tmp_path, monkeypatch, collected_garbage,
                                                                            signum, status):
    where: list[str] = []

    def garbage_with_a_finalizer(trial) -> None:  # noqa: ANN001
        if trial is not None and trial.number == 1:
            _SignalOnCollect(signum, where)   # dropped at once; freed by the collection after this trial

    monkeypatch.setattr(training, "train_operator", _train(garbage_with_a_finalizer))
    monkeypatch.chdir(tmp_path)
    assert _search() == status
    assert where == ["_after_trial"]   # the collection after each trial (Optuna's gc_after_trial, in run.py)
    assert [type(e) for e in collected_garbage] == [KeyboardInterrupt]   # ... which lost the KeyboardInterrupt
    study = _study(tmp_path)
    assert [t.state for t in study.trials[:2]] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert all(t.state == TrialState.WAITING for t in study.trials[2:])   # no trial after it started
    assert _running(tmp_path) == ([], [])
    _resume_completes(tmp_path, monkeypatch)


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_a_signal_inside_the_samplers_decision_fails_the_trial_being_created(tmp_path, monkeypatch, signum, status):
    original = SynoSampler.before_trial
    sent = []

    def deciding(self, study, trial):  # noqa: ANN001 - the sampler's own signature
        original(self, study, trial)
        if not sent and not trial.user_attrs.get(V.BASELINE):   # the first operator trial, inside study.ask()
            sent.append(trial.number)
            signal.raise_signal(signum)

    monkeypatch.setattr(SynoSampler, "before_trial", deciding)
    monkeypatch.setattr(training, "train_operator", _train())
    monkeypatch.chdir(tmp_path)
    assert _search() == status
    lost = _study(tmp_path).trials[sent[0]]
    assert lost.state == TrialState.FAIL and lost.user_attrs[V.FAILURE] == STOP_REASONS[signum]
    assert _running(tmp_path) == ([], [])
    monkeypatch.setattr(SynoSampler, "before_trial", original)
    _resume_completes(tmp_path, monkeypatch)


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_a_signal_inside_lightnings_training_fails_the_trial_and_kills_its_run(tmp_path, monkeypatch, signum, status):
    from lightning_modules.learners.image_classifier import ImageClassifier

    original = ImageClassifier.training_step
    steps = []

    def step(self, batch, batch_idx):  # noqa: ANN001 - Lightning's signature
        steps.append(batch_idx)
        if len(steps) == 3:   # the baseline trial's third batch
            signal.raise_signal(signum)
        return original(self, batch, batch_idx)

    monkeypatch.setattr(ImageClassifier, "training_step", step)
    monkeypatch.chdir(tmp_path)
    assert _search() == status
    assert len(steps) == 3   # stopped at once: no further batch, no further trial
    study = _study(tmp_path)
    assert study.trials[0].state == TrialState.FAIL and study.trials[0].user_attrs[V.FAILURE] == STOP_REASONS[signum]
    assert _running(tmp_path) == ([], [])
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    killed = client.get_run(study.trials[0].user_attrs[V.RUN_ID])
    assert killed.info.status == "KILLED" and killed.data.tags[V.TAG_FAILURE] == STOP_REASONS[signum]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # the handlers are given back
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.setattr(ImageClassifier, "training_step", original)
    _resume_completes(tmp_path, monkeypatch)


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_a_signal_in_the_final_stage_kills_its_run_and_resume_completes_the_stage(tmp_path, monkeypatch, signum,
                                                                                  status):
    sent = []

    def final_training(trial) -> None:  # noqa: ANN001
        if trial is None and not sent:   # the final stage's first training (the baseline's)
            sent.append(1)
            signal.raise_signal(signum)

    monkeypatch.setattr(training, "train_operator", _train(final_training))
    monkeypatch.chdir(tmp_path)
    assert _search(*FINAL) == status
    assert _running(tmp_path) == ([], [])
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    ids = [e.experiment_id for e in client.search_experiments()]
    finals = client.search_runs(ids, filter_string=f"tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'")
    assert [(r.info.run_name, r.info.status) for r in finals] == [("final-baseline", "KILLED")]
    study = _resume_completes(tmp_path, monkeypatch)
    assert V.FINAL in study.user_attrs   # the stage ran to its verdict


def test_a_signal_lost_in_a_finalizer_in_the_final_stage_stops_it_at_the_next_finalist(tmp_path, monkeypatch,
                                                                                       collected_garbage):
    trained = []
    where: list[str] = []

    def final_training(trial) -> None:  # noqa: ANN001
        if trial is None:
            trained.append(1)
            if len(trained) == 1:   # a collection inside the baseline's training runs the finalizer
                _SignalOnCollect(signal.SIGINT, where)
                gc.collect()

    monkeypatch.setattr(training, "train_operator", _train(final_training))
    monkeypatch.chdir(tmp_path)
    assert _search(*FINAL) == 130
    assert where and [type(e) for e in collected_garbage] == [KeyboardInterrupt]
    assert len(trained) == 1   # the next finalist was not trained
    assert _running(tmp_path) == ([], [])
    _resume_completes(tmp_path, monkeypatch)


SECOND_SIGNAL = textwrap.dedent("""
    import signal, sys
    import syno_automl.study.training as training
    from syno_automl import vocabulary as V
    from syno_automl.cli import main

    def train(context, trial, run, **kw):
        if not trial.user_attrs.get(V.BASELINE):
            trial.set_user_attr(V.COST_RATIO, 0.5)
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:   # the first is being handled: a second one
                print("first handled", flush=True)
                signal.raise_signal(signal.SIGINT)
                print("after the second", flush=True)
        return 0.5

    training.train_operator = train
    sys.exit(main(sys.argv[1:]))
""")


def test_a_second_signal_stops_at_once_and_show_flags_the_trial_left_running_as_stale(tmp_path, monkeypatch):
    from _cli_helpers import cli_env, cli_here

    done = subprocess.run([sys.executable, "-c", SECOND_SIGNAL, "search", *COMMON], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=600,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 130, done.stderr
    assert "first handled" in done.stdout and "after the second" not in done.stdout
    assert "again: stopped at once" in done.stderr
    study = _study(tmp_path)
    left = [t.number for t in study.trials if t.state == TrialState.RUNNING]
    assert len(left) == 1   # stopped at once: the trial was not ended (its heartbeat stopped)
    assert stale_trials(study) == set()   # not yet: within the grace period a live worker could be beating
    with sqlite3.connect(tmp_path / "syno.db") as con:   # the grace period (30 s) passes
        con.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', '-5 minutes')")
        con.execute("UPDATE trials SET datetime_start = datetime(datetime_start, '-5 minutes')")
    assert stale_trials(study) == set(left)
    listing = cli_here(tmp_path, "show").stdout.splitlines()
    row = next(line for line in listing if line.split()[:2] == [str(left[0]), "RUNNING"])
    assert row.endswith(STALE)
    assert sum(STALE in line for line in listing) == 1
    monkeypatch.chdir(tmp_path)
    study = _resume_completes(tmp_path, monkeypatch)
    assert study.trials[left[0]].state == TrialState.FAIL   # failed by its stale heartbeat and retried


SIGTERM_ITSELF = textwrap.dedent("""
    import os, signal, sys
    import syno_automl.study.training as training
    from syno_automl import vocabulary as V
    from syno_automl.cli import main

    def train(context, trial, run, **kw):
        if not trial.user_attrs.get(V.BASELINE):
            trial.set_user_attr(V.COST_RATIO, 0.5)
            os.kill(os.getpid(), signal.SIGTERM)   # what `timeout` or `kill` sends, inside the first operator trial
        return 0.5

    training.train_operator = train
    sys.argv[0] = "syno-automl"
    sys.exit(main())   # as the console script calls it: the process ends without the interpreter's teardown
""")


def test_the_command_stopped_by_sigterm_exits_143_with_its_output_flushed_and_nothing_running(tmp_path, monkeypatch):
    from _cli_helpers import cli_env

    args = [a for a in COMMON if a != "-q"]
    done = subprocess.run([sys.executable, "-c", SIGTERM_ITSELF, "search", *args], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip().endswith("syno-automl: interrupted (SIGTERM)")
    assert "trial 0   baseline" in done.stdout and "interrupted" in done.stdout   # the progress lines, flushed
    assert _running(tmp_path) == ([], [])
    study = _study(tmp_path)
    failed = [t.user_attrs.get(V.FAILURE) for t in study.trials if t.state == TrialState.FAIL]
    assert failed == ["stopped by SIGTERM (timeout, kill or a job scheduler)"]   # not Ctrl-C's reason
    monkeypatch.chdir(tmp_path)
    _resume_completes(tmp_path, monkeypatch)


def test_a_search_ends_the_runs_its_stopped_workers_left_running_but_not_those_of_live_trials(tmp_path):
    from syno_automl.study.lost_trials import end_orphan_trial_runs
    from syno_automl.study.storage import make_storage
    from syno_automl.tracking import SearchTracker

    study = optuna.create_study(study_name="s", storage=make_storage(f"sqlite:///{tmp_path / 'syno.db'}",
                                                                     heartbeat_interval=None))
    ended = study.ask()
    study.tell(ended, state=TrialState.FAIL)   # its worker was killed after Optuna ended it, before MLflow heard
    live = study.ask()                          # another worker's trial, running now
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = tracker.study_run("s", {})
    runs = {t.number: tracker.trial_run(parent, "s", t.number, None) for t in (ended, live)}
    assert end_orphan_trial_runs(study, tracker, "s") == [ended.number]
    got = {n: tracker.client.get_run(r.run_id) for n, r in runs.items()}
    assert got[ended.number].info.status == "KILLED" and "worker stopped" in got[ended.number].data.tags[V.FAILURE]
    assert got[live.number].info.status == "RUNNING"


TEARDOWN_SIGNAL = textwrap.dedent("""
    import atexit, os, signal, sys, time
    from syno_automl.cli import main

    atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(5)))   # in the interpreter's teardown
    sys.argv[1:] = ["show"]
    sys.exit(main())
""")


def test_a_signal_after_the_command_is_done_ends_the_process_at_once_with_its_status(tmp_path):
    from _cli_helpers import cli_env

    done = subprocess.run([sys.executable, "-c", TEARDOWN_SIGNAL], cwd=tmp_path, env=cli_env(), capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == 130, done.stderr   # not Python's KeyboardInterrupt traceback nor death by SIGINT
    assert "no study database" in done.stderr and "Traceback" not in done.stderr


def test_a_signal_between_a_final_runs_creation_and_its_training_leaves_no_run_running(tmp_path, monkeypatch):
    from syno_automl.tracking.runs import TrialRun

    original = TrialRun.log_kernels
    sent = []

    def log_kernels(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        original(self, *args, **kwargs)
        if not sent and self.client.get_run(self.run_id).data.tags.get(V.TAG_ROLE) == V.ROLE_FINAL:
            sent.append(self.run_id)   # the first operator finalist's run, made, its training not begun
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(TrialRun, "log_kernels", log_kernels)
    monkeypatch.setattr(training, "train_operator", _train())
    monkeypatch.chdir(tmp_path)
    assert _search(*FINAL) == 143
    assert sent and _running(tmp_path) == ([], [])
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(sent[0]).info.status == "KILLED"
    monkeypatch.setattr(TrialRun, "log_kernels", original)
    _resume_completes(tmp_path, monkeypatch)
