"""A search interrupted (SIGINT or SIGTERM) during trial 2 and resumed evaluates the same operators and ends with
the same verdict as the uninterrupted search: the interrupted operator is queued again and run first by the
resume, and `show` says which trial retries which (issue 46, item 2).

Deterministic, as tests/study/test_interrupt_signals.py: training is replaced by a value that depends on the operator
alone (study.training.train_operator), the final stage's timing by a speedup that depends on the operator alone
(finalists.measure_final), the signal sent by the process to itself from inside trial 2's training; real SQLite
Optuna storage, no MLflow. Small: 3 operator trials of 1 epoch (planned speed objective, operators of at most 6
primitives), 2 finalists of 1 seed."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest
from optuna.trial import TrialState
from test_interrupt_signals import SIGNALS, _running, _signals_as_in_a_terminal, _study  # noqa: F401 - a fixture

import syno_automl.study.training as training
from syno_automl import vocabulary as V
from syno_automl.cli import main
from syno_automl.interrupt import STOP_REASONS
from syno_automl.speed.paired import SpeedupEstimate
from syno_automl.study import finalists

ARGS = ["--trials", "3", "--epochs", "1", "--seed", "0", "--opening", "none", "--speed-objective", "planned",
        "--max-depth", "6", "--tracking-uri", "none", "--finalists", "2", "--final-seeds", "1", "--final-epochs", "1",
        "-q"]


def _share(op_hash: str, salt: int) -> float:
    """A number in [0, 1) fixed by the operator's hash (and `salt`)."""
    return (int(op_hash, 16) >> (4 * salt)) % 1000 / 1000


def _train(interrupt_at: int | None = None, signum: int = signal.SIGINT):
    """train_operator's stand-in: the value and planned cost of an operator fixed by its hash (the baseline 0.95),
    the final stage's the trial's; `signum` sent inside trial `interrupt_at`'s training, once."""
    sent = []

    def train(context, trial, run, operator=None, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        if trial is not None and trial.user_attrs.get(V.BASELINE) or trial is None and operator is None:
            return 0.95
        op_hash = operator.hash if operator is not None else trial.user_attrs[V.HASH]
        if trial is not None:
            trial.set_user_attr(V.COST_RATIO, 0.3 + 0.6 * _share(op_hash, 1))
            if trial.number == interrupt_at and not sent:
                sent.append(trial.number)
                signal.raise_signal(signum)
        return 0.93 + 0.03 * _share(op_hash, 0)
    return train


def _timed(subject, ops, **kw):  # noqa: ANN001, ANN003 - measure_final's signature
    """measure_final's stand-in: each operator's speedup fixed by its hash, a narrow interval."""
    def estimate(ratio: float) -> SpeedupEstimate:
        return SpeedupEstimate(ratio, ratio * 0.99, ratio * 1.01, pairs=2, baseline_ms=10.0, candidate_ms=10.0 / ratio)

    return finalists.SpeedMeasurement("cpu.eager: fixed for the test", [estimate(1.0 + _share(op.hash, 2))
                                                                         for op in ops],
                                      estimate(1.0), baseline_ms=10.0)


def _operators(folder: Path) -> tuple[list[str], str]:
    """(the operators of the study's finished operator trials, in order; the verdict)."""
    study = _study(folder)
    ops = [t.user_attrs[V.HASH] for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
           and not t.user_attrs.get(V.BASELINE)]
    return ops, study.user_attrs[V.FINAL]["verdict"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[list[str], str]:
    """The uninterrupted search's operators and verdict."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(training, "train_operator", _train())
        mp.setattr(finalists, "measure_final", _timed)
        mp.chdir(folder)
        assert main(["search", *ARGS]) == 0
    return _operators(folder)


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_an_interrupted_and_resumed_search_ends_as_the_uninterrupted_one(tmp_path, monkeypatch, uninterrupted,
                                                                       signum, status):
    from _cli_helpers import cli_here

    monkeypatch.setattr(finalists, "measure_final", _timed)
    monkeypatch.setattr(training, "train_operator", _train(interrupt_at=2, signum=signum))
    monkeypatch.chdir(tmp_path)
    assert main(["search", *ARGS]) == status
    study = _study(tmp_path)
    lost, retry = study.trials[2], study.trials[-1]
    assert lost.state == TrialState.FAIL and lost.user_attrs[V.FAILURE] == STOP_REASONS[signum]
    assert retry.state == TrialState.WAITING and retry.user_attrs[V.HASH] == lost.user_attrs[V.HASH]
    assert V.FAILURE not in retry.user_attrs and retry.system_attrs["retry_history"] == [2]
    assert _running(tmp_path) == ([], [])
    rows = {line.split()[0]: line for line in cli_here(tmp_path, "show").stdout.splitlines()
            if line.split() and line.split()[0].isdigit()}
    assert f"retried as trial {retry.number}: {STOP_REASONS[signum]}"[:60] in rows["2"]
    assert rows[str(retry.number)].endswith("retries trial 2's operator")

    monkeypatch.setattr(training, "train_operator", _train())
    assert main(["search", "--resume", *ARGS]) == 0
    ops, verdict = _operators(tmp_path)
    assert ops == uninterrupted[0] and len(set(ops)) == 3
    assert verdict == uninterrupted[1]
    assert "fastest operator" in verdict   # a verdict that names an operator, so that the comparison says something
    assert sum(t.state == TrialState.FAIL for t in _study(tmp_path).trials) == 1   # the interrupted attempt only
