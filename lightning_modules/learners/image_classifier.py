"""Image classification with any backbone: cross-entropy, accuracy, SGD + cosine by default (schedules.SCHEDULES)."""
from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

from syno_automl.errors import OptionError

from .errors import check_finite_loss
from .schedules import SCHEDULES, build_schedule, lightning_scheduler


class ImageClassifier(L.LightningModule):
    """Trains ``backbone`` (images -> logits) and logs ``train_loss`` per step, ``val_loss``/``val_acc`` per epoch.

    Example:
        >>> from lightning_modules import build_model, DigitsDataModule
        >>> task = ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10, lr=0.1)
        >>> L.Trainer(max_epochs=2, accelerator="cpu").fit(task, DigitsDataModule())  # doctest: +SKIP
    """

    def __init__(self, backbone: nn.Module, num_classes: int, lr: float = 0.1, momentum: float = 0.9,
                 weight_decay: float = 5e-4, nesterov: bool = True, label_smoothing: float = 0.0,
                 optimizer: str = "sgd", scheduler: str = "cosine", warmup_steps: int = 0) -> None:
        super().__init__()
        if optimizer not in ("sgd", "adamw"):
            raise OptionError(f"optimizer must be 'sgd' or 'adamw', got {optimizer!r}")
        if scheduler not in SCHEDULES:
            raise OptionError(f"scheduler must be one of {', '.join(SCHEDULES)}, got {scheduler!r}")
        self.save_hyperparameters(ignore=["backbone"])
        self.backbone = backbone
        self.val_acc = MulticlassAccuracy(num_classes=num_classes, average="micro")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.backbone(images)

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels, label_smoothing=self.hparams.label_smoothing)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, labels = batch
        loss = self._loss(self(images), labels)
        check_finite_loss(loss, self.global_step, batch_idx)
        self.log("train_loss", loss, on_step=True, on_epoch=False, batch_size=len(labels))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        images, labels = batch
        logits = self(images)
        self.val_acc.update(logits, labels)
        self.log("val_loss", self._loss(logits, labels), on_epoch=True, batch_size=len(labels))
        self.log("val_acc", self.val_acc, on_epoch=True, prog_bar=True)

    def configure_optimizers(self):  # noqa: ANN201 - Lightning's optimizer config
        hp = self.hparams
        if hp.optimizer == "sgd":
            optimizer = torch.optim.SGD(self.parameters(), lr=hp.lr, momentum=hp.momentum,
                                        nesterov=hp.nesterov and hp.momentum > 0, weight_decay=hp.weight_decay)
        else:
            optimizer = torch.optim.AdamW(self.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
        if hp.scheduler == "none":
            return optimizer
        # over this training's own length: a trial and the final stage each run the whole schedule
        schedule = build_schedule(optimizer, hp.scheduler, self.trainer.estimated_stepping_batches, hp.warmup_steps)
        return {"optimizer": optimizer, "lr_scheduler": lightning_scheduler(schedule)}
