"""The trial's learning-rate schedule (issue 25): each schedule's shape, that a training of any length runs its
whole schedule (a trial and the final stage alike), and the --lr-schedule setting reaching the image task."""
from __future__ import annotations

import lightning as L
import pytest
import torch
from torch import nn

from lightning_modules import DigitsDataModule, ImageClassifier, build_model
from lightning_modules.learners.schedules import ONECYCLE_PEAK, SCHEDULES, schedule_factor
from syno_automl.config import LEGACY_SETTINGS, SearchConfig
from syno_automl.settings import SETTING, SettingChoiceError
from syno_automl.tasks import task_of


@pytest.mark.parametrize("name, step, factor", [
    ("cosine", 0, 1.0), ("cosine", 50, 0.5), ("cosine", 100, 0.0), ("cosine", 130, 0.0),
    ("linear", 0, 1.0), ("linear", 25, 0.75), ("linear", 100, 0.0),
    ("onecycle", 0, 1.0), ("onecycle", 25, ONECYCLE_PEAK), ("onecycle", 100, 0.0),
    ("none", 0, 1.0), ("none", 100, 1.0),
])
def test_each_schedule_over_a_known_length(name: str, step: int, factor: float) -> None:
    assert schedule_factor(name, 100)(step) == pytest.approx(factor, abs=1e-9)


@pytest.mark.parametrize("name", SCHEDULES)
def test_an_unknown_length_keeps_the_rate_after_the_warmup(name: str) -> None:
    factor = schedule_factor(name, float("inf"), warmup_steps=4)
    assert factor(0) == pytest.approx(0.25) and factor(1000) == factor(4) == pytest.approx(1.0)


def test_an_unknown_schedule_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="exponential"):
        schedule_factor("exponential", 100)
    with pytest.raises(ValueError, match="scheduler"):
        ImageClassifier(nn.Identity(), num_classes=3, scheduler="exponential")


class _Rates(L.Callback):
    def __init__(self) -> None:
        self.rates: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # noqa: ANN001
        self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])


@pytest.mark.parametrize("name", ["cosine", "onecycle"])
@pytest.mark.parametrize("epochs", [1, 2])
def test_a_training_of_any_length_runs_the_whole_schedule(name: str, epochs: int) -> None:
    """The schedule spans the Trainer's own epochs: the trial's 3 and the final stage's 6 each end near 0."""
    torch.manual_seed(0)
    rates = _Rates()
    task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10, lr=0.05, scheduler=name)
    L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
              limit_train_batches=8, callbacks=[rates]).fit(task, DigitsDataModule(image_size=8))
    steps = 8 * epochs
    assert len(rates.rates) == steps
    peak = 0.05 * (ONECYCLE_PEAK if name == "onecycle" else 1.0)
    # the last step's rate is the schedule's factor one step before its end: near 0 however short the training
    assert max(rates.rates) == pytest.approx(peak) and rates.rates[-1] < 0.1 * peak


@pytest.mark.parametrize("setting, scheduler", [("cosine", "cosine"), ("onecycle", "onecycle"),
                                                ("linear", "linear"), ("constant", "none")])
def test_the_setting_reaches_the_image_module(setting: str, scheduler: str) -> None:
    config = SearchConfig(lr_schedule=setting)
    module = task_of(config).build_module(config, nn.Identity(), 10)
    assert module.hparams.scheduler == scheduler


def test_old_studies_resume_with_the_schedule_they_ran() -> None:
    assert LEGACY_SETTINGS["lr_schedule"] == "cosine"
    assert SETTING["lr_schedule"].flag == "--lr-schedule"
    with pytest.raises(SettingChoiceError, match="--lr-schedule"):
        SearchConfig(lr_schedule="step").validate()
