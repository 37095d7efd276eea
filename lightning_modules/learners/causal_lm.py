"""Causal language modelling: next-token cross-entropy, perplexity, tokens/s; AdamW + cosine."""
from __future__ import annotations

import time

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.text import Perplexity

from syno_automl.errors import OptionError

from ..models.gpt import GPT, GPTConfig
from .errors import check_finite_loss
from .schedules import cosine_with_warmup, lightning_scheduler


class CausalLM(L.LightningModule):
    """Trains a decoder (token ids ``[B, T]`` -> logits ``[B, T, V]``), the tiny GPT by default.

    Logs ``train_loss`` and ``train_tokens_per_s`` per step, ``val_loss`` and ``val_ppl`` per epoch.

    Example:
        >>> from lightning_modules import TextDataModule
        >>> task = CausalLM(lr=1e-3)
        >>> L.Trainer(max_steps=50, accelerator="cpu").fit(task, TextDataModule())  # doctest: +SKIP
    """

    def __init__(self, model: nn.Module | None = None, lr: float = 1e-3, weight_decay: float = 0.1,
                 betas: tuple[float, float] = (0.9, 0.95), warmup_steps: int = 0, scheduler: str = "cosine") -> None:
        super().__init__()
        if scheduler not in ("cosine", "none"):
            raise OptionError(f"scheduler must be 'cosine' or 'none', got {scheduler!r}")
        self.save_hyperparameters(ignore=["model"])
        self.model = model if model is not None else GPT(GPTConfig())
        self.val_loss_mean = MeanMetric()
        self.val_ppl = Perplexity()
        self._batch_started: float | None = None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens)

    @staticmethod
    def _cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def _loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self._cross_entropy(self(tokens), targets)

    def on_train_batch_start(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._batch_started = time.perf_counter()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        tokens, targets = batch
        loss = self._loss(tokens, targets)
        check_finite_loss(loss, self.global_step, batch_idx)
        self.log("train_loss", loss, on_step=True, on_epoch=False, prog_bar=True, batch_size=len(tokens))
        return loss

    # tokens/s of each step, measured here: Lightning's ThroughputMonitor is a callback the user must add, reports
    # only to a Lightning logger and over a window of batches; this per-step figure shows in callback_metrics
    def on_train_batch_end(self, outputs: object, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        if self._batch_started is None:
            return
        elapsed = time.perf_counter() - self._batch_started
        self._batch_started = None
        if elapsed > 0:
            self.log("train_tokens_per_s", batch[0].numel() / elapsed, on_step=True, on_epoch=False,
                     batch_size=len(batch[0]))

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        tokens, targets = batch
        logits = self(tokens)
        self.val_loss_mean.update(self._cross_entropy(logits, targets), weight=targets.numel())
        self.val_ppl.update(logits.float(), targets)

    def on_validation_epoch_end(self) -> None:
        val_loss = self.val_loss_mean.compute()
        self.val_loss_mean.reset()
        self.log("val_loss", val_loss, prog_bar=True)
        self.log("val_ppl", self.val_ppl.compute())
        self.val_ppl.reset()

    def configure_optimizers(self):  # noqa: ANN201 - Lightning's optimizer config
        hp = self.hparams
        decay = [p for p in self.parameters() if p.requires_grad and p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.requires_grad and p.dim() < 2]
        groups = [{"params": decay, "weight_decay": hp.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=hp.lr, betas=tuple(hp.betas))
        if hp.scheduler == "none":
            return optimizer
        schedule = cosine_with_warmup(optimizer, self.trainer.estimated_stepping_batches, hp.warmup_steps)
        return {"optimizer": optimizer, "lr_scheduler": lightning_scheduler(schedule)}
