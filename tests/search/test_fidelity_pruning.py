"""FidelityPruning (syno_automl.search.fidelity): Optuna's pruners over epochs, through a companion study for
multi-objective searches. Real Lightning trainers whose val_acc follows a given schedule, a real SQLite storage."""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import optuna
import pytest
import torch
from optuna.trial import TrialState
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from syno_automl import vocabulary as V
from syno_automl.search.fidelity import FidelityPruning, fidelity_study_name, make_pruner, open_fidelity_study


class Scripted(L.LightningModule):
    """Trains a little; its val_acc after epoch e is schedule[e] (what a pruner sees, fixed in advance)."""

    def __init__(self, schedule: Sequence[float]) -> None:
        super().__init__()
        self.schedule = list(schedule)
        self.layer = nn.Linear(2, 1)

    def training_step(self, batch, _):
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch, _):
        self.log("val_acc", float(self.schedule[self.current_epoch]))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _loader() -> DataLoader:
    return DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=4)


def _train(schedule: Sequence[float], callback: FidelityPruning) -> str:
    """'complete' or 'pruned: <reason>'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = L.Trainer(max_epochs=len(schedule), logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                            accelerator="cpu", callbacks=[callback])
        try:
            trainer.fit(Scripted(schedule), _loader(), _loader())
        except optuna.TrialPruned as e:
            return f"pruned: {e}"
    return "complete"


# schedules by trial: the first ones set the rung, the 4th is far below them, the 5th learns well
SCHEDULES = [[0.50, 0.60], [0.70, 0.80], [0.65, 0.75], [0.05, 0.90], [0.90, 0.95]]


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


def test_a_pareto_trial_far_below_the_others_is_pruned_in_the_companion_study(storage):
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "minimize"])
    companion = open_fidelity_study(study, make_pruner("halving", epochs=2))
    outcomes = []
    for schedule in SCHEDULES:
        trial = study.ask()
        outcome = _train(schedule, FidelityPruning(trial, companion, max_epochs=2))
        outcomes.append(outcome)
        if outcome == "complete":
            study.tell(trial, [schedule[-1], 0.5])
        else:
            study.tell(trial, state=TrialState.PRUNED)
    assert outcomes[0] == "complete" and outcomes[1] == "complete" and outcomes[4] == "complete"
    assert outcomes[3].startswith("pruned: val_acc=0.0500 at epoch 1: pruned by SuccessiveHalvingPruner")
    # the companion holds what the search study cannot: per-epoch values, one trial per search trial
    assert companion.study_name == "s" + V.FIDELITY_SUFFIX == fidelity_study_name("s")
    by_search = {t.user_attrs[V.SEARCH_TRIAL]: t for t in companion.trials}
    assert sorted(by_search) == [t.number for t in study.trials]
    for t in study.trials:
        twin = by_search[t.number]
        assert t.user_attrs[V.FIDELITY_TRIAL] == twin.number and twin.state == t.state
        assert twin.intermediate_values == {e + 1: pytest.approx(v) for e, v in
                                            enumerate(SCHEDULES[t.number][:len(twin.intermediate_values)])}
        assert not t.intermediate_values   # a multi-objective trial holds none
    assert by_search[3].state == TrialState.PRUNED and len(by_search[3].intermediate_values) == 1
    assert by_search[4].value == pytest.approx(0.95)


def test_the_last_epoch_is_never_pruned(storage):
    """A trial is judged only while there is training left to save: at its last epoch it completes."""
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "minimize"])
    companion = open_fidelity_study(study, make_pruner("halving", epochs=2))
    for schedule in ([0.5, 0.9], [0.6, 0.0]):   # the second is far below at epoch 2, its last
        assert _train(schedule, FidelityPruning(study.ask(), companion, max_epochs=2)) == "complete"
    assert [t.state for t in companion.trials] == [TrialState.COMPLETE] * 2


def test_an_accuracy_study_prunes_with_its_own_pruner(storage):
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize",
                                pruner=make_pruner("halving", epochs=2))
    outcomes = []
    for schedule in SCHEDULES:
        trial = study.ask()
        outcome = _train(schedule, FidelityPruning(trial, max_epochs=2))
        study.tell(trial, schedule[-1]) if outcome == "complete" else study.tell(trial, state=TrialState.PRUNED)
        outcomes.append(outcome)
    assert outcomes[3].startswith("pruned: val_acc=0.0500 at epoch 1") and outcomes[4] == "complete"
    assert study.trials[3].intermediate_values == {1: pytest.approx(0.05)}
    assert fidelity_study_name("s") not in {s.study_name for s in optuna.get_all_study_summaries(storage)}


def test_milestones_and_nop_pruner_and_arguments(storage):
    assert _train([0.1, 0.9], FidelityPruning(None, milestones={1: 0.2})).startswith(
        "pruned: val_acc=0.1000 < 0.2 at epoch 1 (milestone)")
    study = optuna.create_study(storage=storage, direction="maximize", pruner=make_pruner("none", epochs=2))
    for schedule in SCHEDULES:   # no pruner: everything trains to the end
        assert _train(schedule, FidelityPruning(study.ask(), max_epochs=2)) == "complete"
    multi = optuna.create_study(directions=["maximize", "minimize"])
    with pytest.raises(ValueError, match="companion"):
        FidelityPruning(multi.ask())
    with pytest.raises(ValueError, match="pruner must be one of"):
        make_pruner("median", epochs=2)
    hyperband = make_pruner("hyperband", epochs=3)
    assert isinstance(hyperband, optuna.pruners.HyperbandPruner)
