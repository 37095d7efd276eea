"""An exhausted space ends a study, it does not crash it (issue 46, item 3): the trial the sampler has nothing for is
pruned with the sampler's message and ``study.optimize`` stops; ``substitute``'s cost budget follows the layer kind
(Conv1d: 2.0, the CLI's MNIST-1D default), and its check warns when the budgets hold only the layer's known forms."""
from __future__ import annotations

import logging
import warnings

import optuna
import pytest
import torch
from _syno_helpers import tiny_space
from optuna.trial import TrialState
from torch import nn

from lightning_modules.models.cnn1d import pointwise_cnn1d
from syno_automl import Operator, known, substitute
from syno_automl.placeholder.empty_space import KnownFormsOnlyWarning
from syno_automl.search.mcts import SearchExhaustedError
from syno_automl.search.sampler import NothingLeftToPropose, SynoSampler, suggest_operator

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _objective(trial: optuna.Trial) -> float:   # no training: a number from the operator
    return 1.0 / (1 + suggest_operator(trial).depth)


def _conv1d_model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return pointwise_cnn1d(), torch.randn(64, 1, 40)   # MNIST-1D's batch of sequences: 1 channel, length 40


def test_the_docs_conv1d_library_path_runs_its_trials():
    model, x = _conv1d_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", KnownFormsOnlyWarning)
        sub = substitute(model, nn.Conv1d, x)   # as docs/search.md says
    assert sub.options["cost_ratio"] == 2.0   # the layer kind's default, the CLI's for MNIST-1D
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(sub.space, seed=0))
    study.optimize(_objective, n_trials=6)
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6
    assert len({t.user_attrs["syno.hash"] for t in trials}) == 6


def test_a_budget_holding_only_known_forms_warns_and_its_study_ends_cleanly(caplog):
    model, x = _conv1d_model()
    with pytest.warns(KnownFormsOnlyWarning, match=r"cost_ratio=1\b.*known forms of the layer"):
        sub = substitute(model, nn.Conv1d, x, cost_ratio=1.0)
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(sub.space, seed=0))
    with caplog.at_level(logging.WARNING, logger="syno_automl.search.sampler"):
        study.optimize(_objective, n_trials=5)   # returns: nothing raised
    trials = study.trials
    assert trials and len(trials) < 5 and trials[-1].state == TrialState.PRUNED
    assert all(t.state == TrialState.COMPLETE for t in trials[:-1])
    assert all(known.classify(Operator.from_json(sub.space, t.user_attrs["syno.operator"])) for t in trials[:-1])
    assert "the study stops" in caplog.text and "cost budget" in caplog.text   # the sampler's own message


def test_a_tiny_space_ends_optimize_with_the_samplers_message(caplog):
    sampler = SynoSampler(tiny_space(depth=3), seed=0)   # 7 operators
    study = optuna.create_study(direction="maximize", sampler=sampler)
    with caplog.at_level(logging.WARNING, logger="syno_automl.search.sampler"):
        study.optimize(_objective, n_trials=20)
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE] * 7 + [TrialState.PRUNED]   # ended after the first with nothing left
    assert "trial 7: no operator left to propose" in caplog.text and "the study stops" in caplog.text
    with pytest.raises(NothingLeftToPropose, match="trial 7: no operator left") as raised:
        sampler.operator_of(study.trials[7])
    assert isinstance(raised.value, SearchExhaustedError) and isinstance(raised.value, optuna.TrialPruned)
    study.optimize(_objective, n_trials=3)   # asked again: one more pruned trial, and the study stops again
    assert [t.state for t in study.trials[8:]] == [TrialState.PRUNED]


def test_outside_optimize_the_trial_says_it():
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(tiny_space(depth=3), seed=0))
    study.optimize(_objective, n_trials=7)
    trial = study.ask()   # ask and tell: study.stop() does not apply, the trial's error tells
    with pytest.raises(SearchExhaustedError, match="no operator left"):
        suggest_operator(trial)


def test_two_threads_stop_on_an_exhausted_space(tmp_path):
    study = optuna.create_study(direction="maximize", storage=f"sqlite:///{tmp_path / 'x.db'}",
                                sampler=SynoSampler(tiny_space(depth=3), seed=0))
    study.optimize(_objective, n_trials=20, n_jobs=2)
    trials = study.trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 7 and len({t.user_attrs["syno.hash"] for t in complete}) == 7
    assert all(t.state == TrialState.PRUNED for t in trials if t.state != TrialState.COMPLETE)
    assert len(trials) <= 9   # each thread ends at its first trial with nothing left
