"""One language-model trial: the GPT trains with the operator in its QKV projections for a step and time budget.

The trial's value is the validation loss after training (lower is better). Its MLflow run gets the curves
``train_loss`` (every step) and ``val_loss`` / ``val_ppl`` (every ``val_every`` steps and at the end), with
step = optimizer step, for the loss-vs-step report; and ``tokens_per_s`` (training throughput, from the second
step on, validation excluded) with ``throughput_ratio`` against the baseline trial of the same study.

Example:
    >>> value = train_lm(context, trial, run, substitution=cb, steps=200, time_budget=60)   # doctest: +SKIP
"""
from __future__ import annotations

import math
import time
import warnings
from typing import Any

import lightning as L

from syno_automl import vocabulary as V
from syno_automl.errors import TrialResultError
from syno_automl.interrupt import fit
from syno_automl.search.time_limits import TrainingTimeBudget
from syno_automl.tasks.base import TrainingContext

__all__ = ["LMTrialMeter", "train_lm"]


class LMTrialMeter(L.Callback):
    """Records the loss curves and the training throughput of one run (and logs them to ``run`` when given).

    Throughput is counted here rather than with Lightning's ThroughputMonitor: that one reports a rate over a
    sliding window of batches, and only through a Lightning logger (trials train with ``logger=False`` and log
    to their MLflow run directly); the trial's figure is the whole run's tokens over the time spent in training
    steps after the first, the number ``throughput_ratio`` compares with the baseline's.
    """

    def __init__(self, run: Any | None = None) -> None:
        super().__init__()
        self.run = run
        self.train_loss: list[tuple[int, float]] = []
        self.val_loss: list[tuple[int, float]] = []
        self.val_ppl: list[float] = []   # the task's torchmetrics Perplexity, beside each val_loss point
        self.tokens = 0
        self.seconds = 0.0
        self._batch_started: float | None = None
        self._logged = 0
        self._logged_val = 0

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > 0 else None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self._batch_started = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self._batch_started is not None and trainer.global_step > 1:  # the first step warms caches up
            self.seconds += time.perf_counter() - self._batch_started
            self.tokens += int(batch[0].numel())
        self._batch_started = None
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.train_loss.append((trainer.global_step, float(loss)))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or "val_loss" not in trainer.callback_metrics:
            return
        value = float(trainer.callback_metrics["val_loss"])
        if self.val_loss and self.val_loss[-1][0] == trainer.global_step:
            return  # the final validation of a run that had just validated
        self.val_loss.append((trainer.global_step, value))
        ppl = trainer.callback_metrics.get("val_ppl")
        ppl = float(ppl) if ppl is not None else math.inf
        self.val_ppl.append(ppl if math.isfinite(ppl) else math.exp(min(value, 50.0)))  # MLflow stores finite
        self.flush()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.flush()

    def flush(self) -> None:
        """Sends the loss points gathered since the last flush."""
        if self.run is None:
            return
        self.run.log_series("train_loss", self.train_loss[self._logged:])
        self._logged = len(self.train_loss)
        for (step, value), ppl in zip(self.val_loss[self._logged_val:], self.val_ppl[self._logged_val:]):
            self.run.log_metrics({"val_loss": value, "val_ppl": ppl}, step=step)
        self._logged_val = len(self.val_loss)


def train_lm(context: TrainingContext, module: L.LightningModule, trial: Any | None, run: Any | None, *,
             substitution: L.Callback, steps: int, time_budget: float | None) -> float:
    """Trains `module` (the task's, of a fresh model) with ``substitution`` installed on ``context``'s data;
    returns the final val_loss."""
    config = context.config
    task = module
    meter = LMTrialMeter(run)
    callbacks: list[Any] = [substitution, meter]
    budget = TrainingTimeBudget(time_budget) if time_budget else None
    if budget is not None:
        callbacks.append(budget)
    train_batches = len(context.datamodule.train_dataloader())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*LeafSpec.*")
        trainer = L.Trainer(max_steps=steps, max_epochs=-1, val_check_interval=min(config.val_every, train_batches),
                            check_val_every_n_epoch=None, limit_val_batches=config.val_batches,
                            gradient_clip_val=1.0,  # as GPT-2 training does; a loss spike then rarely turns NaN
                            **context.device.trainer_options(), logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                            callbacks=callbacks)
        started = time.time()
        try:
            fit(trainer, task, datamodule=context.datamodule)  # Ctrl-C stays a KeyboardInterrupt
            if not meter.val_loss or meter.val_loss[-1][0] != trainer.global_step:
                trainer.validate(task, datamodule=context.datamodule, verbose=False)
        finally:
            if run is not None:
                metrics = {"train_seconds": time.time() - started, "steps": trainer.global_step,
                           "tokens_per_s": meter.tokens_per_s}
                if substitution.flops is not None:
                    metrics.update(flops=substitution.flops, num_params=substitution.params,
                                   flops_ratio=substitution.flops_ratio_used)
                run.log_metrics(metrics)
                if budget is not None and budget.stopped:
                    run.set_tags({V.TAG_STOPPED_BY: f"time budget {time_budget:g} s"})
    if trial is not None:
        trial.set_user_attr(V.STEPS, int(trainer.global_step))
        if meter.tokens_per_s is not None:
            trial.set_user_attr(V.TOKENS_PER_S, meter.tokens_per_s)
    if not meter.val_loss or not math.isfinite(meter.val_loss[-1][1]):
        raise TrialResultError(f"no finite val_loss after training (got {meter.val_loss[-1:] or None})")
    return meter.val_loss[-1][1]
