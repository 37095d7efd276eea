"""The Lightning learners (lightning_modules.learners): short real training runs on the embedded data, metrics,
schedules and the NaN error."""
from __future__ import annotations

import math

import lightning as L
import pytest
import torch
from torch import nn

from lightning_modules import CausalLM, DigitsDataModule, ImageClassifier, TextDataModule, build_model
from lightning_modules.learners import NonFiniteLossError
from lightning_modules.learners.schedules import cosine_with_warmup


def quiet_trainer(**kw: object) -> L.Trainer:
    return L.Trainer(accelerator="cpu", enable_progress_bar=False, logger=False, enable_checkpointing=False,
                     enable_model_summary=False, **kw)


class LossRecorder(L.Callback):
    """Keeps every training-step loss."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        self.losses.append(float(outputs["loss"]))


def test_small_cnn_on_digits_beats_chance_after_two_epochs() -> None:
    torch.manual_seed(0)
    dm = DigitsDataModule(image_size=8, batch_size=32)
    task = ImageClassifier(build_model("small_cnn", num_classes=10, in_channels=1), num_classes=10, lr=0.1)
    trainer = quiet_trainer(max_epochs=2, limit_train_batches=20)
    trainer.fit(task, dm)
    metrics = trainer.callback_metrics
    assert set(metrics) >= {"train_loss", "val_loss", "val_acc"}
    assert metrics["val_acc"] > 0.5  # chance is 0.1; seeds 0-5 reach 0.95-0.98
    assert trainer.optimizers[0].param_groups[0]["nesterov"] is True


def test_causal_lm_loss_decreases_and_perplexity_is_exp_of_val_loss() -> None:
    torch.manual_seed(0)
    dm = TextDataModule(seq_len=32, batch_size=16, max_bytes=40_000)
    task = CausalLM(build_model("gpt", num_classes=256, block_size=32), lr=3e-3)
    recorder = LossRecorder()
    trainer = quiet_trainer(max_epochs=1, limit_train_batches=25, limit_val_batches=4, callbacks=[recorder])
    trainer.fit(task, dm)
    assert len(recorder.losses) == 25
    assert recorder.losses[0] == pytest.approx(math.log(256), rel=0.05)  # uniform over bytes at init
    assert sum(recorder.losses[-5:]) / 5 < sum(recorder.losses[:5]) / 5 - 0.5
    metrics = trainer.callback_metrics
    assert metrics["val_ppl"].item() == pytest.approx(math.exp(metrics["val_loss"].item()), rel=1e-5)
    assert metrics["train_tokens_per_s"] > 0


class NaNImageBackbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1)) * float("nan")


class NaNLanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(256, 256)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * float("inf") * 0.0


@pytest.mark.parametrize("make_task, make_data", [
    (lambda: ImageClassifier(NaNImageBackbone(), num_classes=10), lambda: DigitsDataModule(image_size=8)),
    (lambda: CausalLM(NaNLanguageModel()), lambda: TextDataModule(seq_len=16, max_bytes=5_000)),
])
def test_non_finite_training_loss_raises_with_the_step(make_task, make_data) -> None:  # noqa: ANN001
    with pytest.raises(NonFiniteLossError, match="at step 0") as error:
        quiet_trainer(max_steps=3, num_sanity_val_steps=0).fit(make_task(), make_data())
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("step, factor", [(0, 1.0), (50, 0.5), (100, 0.0), (150, 0.0)])
def test_cosine_schedule_decays_from_lr_to_zero(step: int, factor: float) -> None:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    assert cosine_with_warmup(optimizer, total_steps=100).lr_lambdas[0](step) == pytest.approx(factor, abs=1e-9)


@pytest.mark.parametrize("step, factor", [(0, 0.25), (3, 1.0), (1000, 1.0)])
def test_warmup_then_constant_when_the_length_is_unknown(step: int, factor: float) -> None:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = cosine_with_warmup(optimizer, total_steps=float("inf"), warmup_steps=4)
    assert schedule.lr_lambdas[0](step) == pytest.approx(factor)


def test_label_smoothing_changes_the_loss() -> None:
    logits, labels = torch.tensor([[4.0, 0.0, 0.0]]), torch.tensor([0])
    plain = ImageClassifier(nn.Identity(), num_classes=3)._loss(logits, labels)
    smoothed = ImageClassifier(nn.Identity(), num_classes=3, label_smoothing=0.1)._loss(logits, labels)
    assert smoothed > plain


@pytest.mark.parametrize("kw, message", [({"optimizer": "lion"}, "optimizer"), ({"scheduler": "step"}, "scheduler")])
def test_unknown_optimizer_or_scheduler_is_rejected(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ImageClassifier(nn.Identity(), num_classes=3, **kw)
