"""Ctrl-C never lands inside a database write (syno_automl.interrupt): the write completes, the interrupt is raised
after it, and the interrupted trial and its MLflow run can still be marked. The SIGINT is sent from inside a
database transaction, between its write and its commit (a SQLAlchemy event), so the tests do not depend on timing."""
from __future__ import annotations

import contextlib
import signal

import optuna
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from syno_automl.interrupt import (
    check_interrupt,
    deferred_interrupt,
    exit_status,
    interrupt_requested,
    stop_on_signals,
)
from syno_automl.study.storage import make_storage
from syno_automl.tracking import SearchTracker


@contextlib.contextmanager
def _ctrl_c_in_next_write(signum: int = signal.SIGINT):
    """SIGINT (`signum`) to this process right after the next INSERT or UPDATE of any SQLAlchemy engine, before its
    commit."""
    fired = []

    def fire(conn, cursor, statement, parameters, context, executemany):
        if not fired and statement.lstrip().upper().startswith(("INSERT", "UPDATE")):
            fired.append(statement)
            signal.raise_signal(signum)

    event.listen(Engine, "after_cursor_execute", fire)
    try:
        yield fired
    finally:
        event.remove(Engine, "after_cursor_execute", fire)


@pytest.fixture(autouse=True)
def _ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt here and SIGTERM kills, as in a terminal, even when pytest runs where SIGINT
    is ignored (a background job of a shell without job control)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_term = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGINT, previous)
    signal.signal(signal.SIGTERM, previous_term)


def test_ctrl_c_inside_a_deferred_block_is_raised_when_it_ends():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            signal.raise_signal(signal.SIGINT)
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_wins_over_an_error_of_the_block_and_nested_blocks_raise_once():
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            with deferred_interrupt():
                signal.raise_signal(signal.SIGINT)
            raise ValueError("the block's own error")
    with deferred_interrupt():  # nothing pending any more
        pass


def test_mlflow_write_cut_by_ctrl_c_completes_and_the_run_can_be_killed(tmp_path):
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = tracker.run(tracker.study_run("s", {}))
    with _ctrl_c_in_next_write() as fired, pytest.raises(KeyboardInterrupt):
        run.log_metrics({"val_acc": 0.5}, step=1)
    assert fired
    run.log_failure("interrupted")
    run.finish("KILLED")
    got = tracker.client.get_run(run.run_id)
    assert got.info.status == "KILLED"
    assert got.data.metrics["val_acc"] == 0.5 and got.data.tags["syno.failure"] == "interrupted"


def test_optuna_write_cut_by_ctrl_c_completes_and_the_trial_can_be_failed(tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = make_storage(url, heartbeat_interval=None)
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    with _ctrl_c_in_next_write() as fired, pytest.raises(KeyboardInterrupt):
        trial.report(0.25, step=3)
    assert fired
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    frozen = optuna.load_study(study_name="s", storage=url).trials[0]
    assert frozen.state == optuna.trial.TrialState.FAIL and frozen.intermediate_values == {3: 0.25}


# -- stop_on_signals: SIGINT and SIGTERM recorded, raised again at checkpoints, held inside writes --------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_inside_stop_on_signals_both_signals_raise_and_are_recorded_and_the_handlers_are_given_back(signum):
    with stop_on_signals():
        assert interrupt_requested() is None
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signum)
        assert interrupt_requested() == signum and exit_status() == 128 + signum
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with stop_on_signals():   # a new block forgets the last one's signal
        assert interrupt_requested() is None
        check_interrupt()


def test_a_swallowed_interrupt_is_raised_again_at_the_next_checkpoint():
    recorded = []
    with stop_on_signals():
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass   # what a finalizer does to it
        with pytest.raises(KeyboardInterrupt):
            check_interrupt(lambda: recorded.append("the reason, first"))
    assert recorded == ["the reason, first"]


def test_a_signal_ignored_when_the_block_starts_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stop_on_signals():
        signal.raise_signal(signal.SIGINT)   # a background job's Ctrl-C: nothing
        assert interrupt_requested() is None
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_inside_stop_on_signals_a_signal_in_a_write_waits_for_its_end(tmp_path, signum):
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = tracker.run(tracker.study_run("s", {}))
    with stop_on_signals():
        with _ctrl_c_in_next_write(signum) as fired, pytest.raises(KeyboardInterrupt):
            run.log_metrics({"val_acc": 0.5}, step=1)
        assert fired and interrupt_requested() == signum
        run.log_failure("interrupted")   # the stop's own writes are not interrupted again
        run.finish("KILLED")
    got = tracker.client.get_run(run.run_id)
    assert got.info.status == "KILLED" and got.data.metrics["val_acc"] == 0.5
