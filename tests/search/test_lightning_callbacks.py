"""SynoSubstitution and SynoPruning in a user's own Lightning Trainer."""
from __future__ import annotations

import warnings

import lightning as L
import optuna
import pytest
import torch
from _syno_helpers import tiny_space
from torch import nn

from lightning_modules import DigitsDataModule, build_model
from lightning_modules.learners import ImageClassifier
from syno_automl.placeholder import Placeholder, substitute
from syno_automl.search.callbacks import BudgetExceededError, OperatorBuildError, SynoPruning, SynoSubstitution
from syno_automl.search.sampler import SynoSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)
WHERE = {"where": lambda name, m: m.in_channels != 1, "max_depth": 8}


@pytest.fixture(scope="module")
def digits():
    dm = DigitsDataModule(image_size=8, batch_size=32)
    dm.setup("fit")
    return dm


@pytest.fixture(scope="module")
def search_space(digits):
    """The space the search side builds from a probe model (as study.prepare does)."""
    x = next(iter(digits.train_dataloader()))[0]
    return substitute(build_model("small_cnn", 10, 1), nn.Conv2d, x, flops_ratio=0.5, **WHERE, cost_ratio=None).space


def _cheap_operator(space):
    return min(space.sample(6, seed=0), key=lambda op: op.total_flops())


def _trainer(callbacks, epochs: int = 1) -> L.Trainer:
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    return L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                     limit_train_batches=2, limit_val_batches=2, callbacks=callbacks)


def test_substitution_happens_before_the_optimizer(digits, search_space):
    torch.manual_seed(0)
    op = _cheap_operator(search_space)
    task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10)
    originals = [m.weight for m in task.modules() if isinstance(m, nn.Conv2d) and m.in_channels != 1]
    cb = SynoSubstitution(op, layer=nn.Conv2d, flops_ratio=0.5, **WHERE)
    trainer = _trainer([cb])
    trainer.fit(task, datamodule=digits)
    placeholders = [m for m in task.modules() if isinstance(m, Placeholder)]
    assert len(placeholders) == 2 and all(p.has_operator for p in placeholders)
    optimized = {id(p) for g in trainer.optimizers[0].param_groups for p in g["params"]}
    operator_params = [p for ph in placeholders for p in ph.operator.parameters()]
    assert operator_params and all(id(p) in optimized for p in operator_params)
    assert not any(id(w) in optimized for w in originals)
    assert cb.flops_ratio_used is not None and cb.flops_ratio_used <= 0.5
    assert "val_acc" in trainer.callback_metrics
    trainer.validate(task, datamodule=digits)  # setup again: no second substitution
    assert [m for m in task.modules() if isinstance(m, Placeholder)] == placeholders


def test_setup_runs_the_example_where_the_weights_are(digits, search_space):
    """Lightning reports the accelerator as the module's device before its setup hooks, while the weights are
    still on the CPU (they move after them): on a GPU the example went to CUDA and every trial failed. Here a
    device the weights are not on ('meta') stands in for it."""
    op = _cheap_operator(search_space)
    task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10)
    task._device = torch.device("meta")
    x = next(iter(digits.train_dataloader()))[0]
    cb = SynoSubstitution(op, layer=nn.Conv2d, flops_ratio=0.5, example_input=x, **WHERE)
    cb.setup(_trainer([]), task, "fit")
    assert cb.substitution is not None and cb.flops is not None and cb.flops > 0


def test_budget_is_checked(digits, search_space):
    op = max(search_space.sample(6, seed=1), key=lambda o: o.total_flops())
    task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10)
    with pytest.raises(BudgetExceededError, match="budget"):
        _trainer([SynoSubstitution(op, flops_ratio=1e-6, **WHERE)]).fit(task, datamodule=digits)
    assert not any(isinstance(m, Placeholder) for m in task.modules())  # the original layers are back


def test_operator_that_cannot_be_built_is_reported(digits):
    foreign = tiny_space().sample(1, seed=0)[0]  # a [N, C_in] -> [N, C_out] operator: not for a Conv2d
    task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10)
    with pytest.raises(OperatorBuildError, match=foreign.hash):
        _trainer([SynoSubstitution(foreign, **WHERE)]).fit(task, datamodule=digits)


def test_trial_substitution_and_milestone_pruning(digits, search_space):
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(search_space, seed=0))
    study.enqueue_trial({}, user_attrs={"syno.baseline": True})
    study.enqueue_trial({}, user_attrs={"syno.operator": _cheap_operator(search_space).to_json()})

    def objective(trial: optuna.Trial) -> float:
        task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10)
        trainer = _trainer([SynoSubstitution(trial, flops_ratio=0.5, **WHERE),
                            SynoPruning(trial, monitor="val_acc", milestones={2: 1.01})], epochs=2)
        trainer.fit(task, datamodule=digits)
        return float(trainer.callback_metrics["val_acc"])

    study.optimize(objective, n_trials=2)
    base, op_trial = study.trials
    assert base.state == op_trial.state == optuna.trial.TrialState.PRUNED  # nobody reaches 101% at epoch 2
    assert set(base.intermediate_values) == {1, 2}
    assert base.user_attrs["syno.flops_ratio"] == 1.0
    assert 0 < op_trial.user_attrs["syno.flops_ratio"] <= 0.5
    assert op_trial.user_attrs["syno.flops"] < base.user_attrs["syno.flops"]


def test_pruning_validates_its_arguments():
    with pytest.raises(ValueError):
        SynoPruning(None, milestones={0: 0.5})
    with pytest.raises(ValueError):
        SynoPruning(None, mode="median")
    with pytest.raises(TypeError):
        SynoSubstitution("not an operator")  # type: ignore[arg-type]


def test_operator_starts_at_the_scale_of_the_layer_it_replaces(digits, search_space):
    from syno_automl.search.callbacks import _placeholder_inputs, match_output_scale

    torch.manual_seed(0)
    model = build_model("small_cnn", 10, 1)
    x = next(iter(digits.train_dataloader()))[0]
    sub = substitute(model, nn.Conv2d, x, **WHERE, cost_ratio=None)
    inputs = _placeholder_inputs(sub, model, x)
    modules = sub.apply(_cheap_operator(search_space))
    match_output_scale(sub, modules, inputs)
    with torch.no_grad():
        for (_, ph), module, inp in zip(sub.placeholders, modules, inputs):
            assert float(module(inp).std()) == pytest.approx(float(ph.referred_layer(inp).std()), rel=1e-3)
