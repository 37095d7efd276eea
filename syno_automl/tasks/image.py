"""The image task: classification, a trial maximizes val_acc after `epochs` epochs (Lightning fit), pruned by
Hyperband or successive halving over epochs (syno_automl.search.fidelity) and by milestones."""
from __future__ import annotations

import math
import time
import warnings
from typing import TYPE_CHECKING, Any

from syno_automl import vocabulary as V
from syno_automl.errors import TrialResultError
from syno_automl.tasks.base import Task, TrainingContext
from syno_automl.words import counted

if TYPE_CHECKING:
    import optuna

    from syno_automl.config import SearchConfig
    from syno_automl.search.fidelity import FidelityPruning
    from syno_automl.search.reward import Reward

__all__ = ["ImageTask"]


class ImageTask(Task):
    """Image classification (the embedded digits demo by default)."""

    name = "image"
    objective_name = "val_acc"
    direction = "maximize"
    final_metric = "accuracy"

    def datamodule_kwargs(self, config: SearchConfig) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if config.dataset == "digits":
            kwargs["image_size"] = config.image_size or 8
        elif config.image_size is not None:
            kwargs["image_size"] = config.image_size
        return kwargs

    def sizes(self, datamodule: Any) -> tuple[int, int]:
        return int(datamodule.num_classes), int(datamodule.in_channels)

    def build_module(self, config: SearchConfig, model: Any, num_classes: int) -> Any:
        from lightning_modules.learners import ImageClassifier

        # the schedule runs over the Trainer's own length: a trial's epochs, or the final stage's
        scheduler = "none" if config.lr_schedule == "constant" else config.lr_schedule
        assert config.lr is not None  # SearchConfig.__post_init__ gives it the task's default
        return ImageClassifier(model, num_classes=num_classes, lr=config.lr, scheduler=scheduler)

    def reward(self, config: SearchConfig, num_classes: int) -> Reward:
        from syno_automl.search.reward import Reward

        lower = config.reward_lower if config.reward_lower is not None else 1.0 / max(num_classes, 2)
        return Reward(lower=lower, upper=config.reward_upper, power=config.reward_power)

    def train(self, context: TrainingContext, trial: Any | None, run: Any | None, substitution: Any, *, epochs: int,
              milestones: dict[int, float] | None, timeout: float | None, steps: int | None) -> float:
        """`epochs` of Lightning fit; `timeout`: -1 for the config's trial_timeout, None or 0 for no limit (over
        it: failed)."""
        import lightning as L

        from syno_automl.interrupt import fit
        from syno_automl.search.callbacks import EpochMetricsLogger
        from syno_automl.search.time_limits import SlowTrialGuard

        config = context.config
        task = self.build(context)
        callbacks: list[Any] = [substitution]
        if run is not None:
            callbacks.append(EpochMetricsLogger(run))
        milestones = config.milestones if milestones is None else milestones
        callbacks.append(_fidelity_pruning(config, trial, epochs, milestones))
        timeout = config.trial_timeout if timeout == -1.0 else timeout
        if timeout:  # a safety net measured against the baseline model in this process: load does not decide
            callbacks.append(SlowTrialGuard(timeout, baseline=lambda: self.build_model(config, context.num_classes,
                                                                                       context.in_channels)))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*LeafSpec.*")
            trainer = L.Trainer(max_epochs=epochs, **context.device.trainer_options(), logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                num_sanity_val_steps=0, callbacks=callbacks)
            started = time.time()
            try:
                fit(trainer, task, datamodule=context.datamodule)  # Ctrl-C stays a KeyboardInterrupt
            finally:
                if run is not None and substitution.flops is not None:
                    run.log_metrics({"flops": substitution.flops, "num_params": substitution.params,
                                     "flops_ratio": substitution.flops_ratio_used, **substitution.cost_metrics(),
                                     "train_seconds": time.time() - started})
        value = trainer.callback_metrics.get("val_acc")
        if value is None or not math.isfinite(float(value)):
            raise TrialResultError(f"no finite val_acc after training (got {value})")
        return float(value)

    def budget_label(self, config: SearchConfig) -> str:
        return counted(config.epochs, "epochs")

    def latency_sizes(self, config: SearchConfig) -> dict[str, int]:
        return {"N": 1}   # batch 1, as the paper's latency figures

    def near_chance(self, value: float, num_classes: int) -> str | None:
        chance = 1.0 / max(num_classes, 2)
        if value > 1.5 * chance:   # ResNet-34 after 1 epoch on 10 classes: 0.109
            return None
        return f"val_acc {value:.3f} is near chance ({chance:.3f} for {num_classes} classes)"

    def trial_budget(self, config: SearchConfig) -> int:
        return int(config.epochs)

    def final_budget(self, config: SearchConfig) -> tuple[int, str]:
        # by default twice the search's epochs
        return (int(config.final_epochs) if config.final_epochs else 2 * int(config.epochs)), "epochs"


def _fidelity_pruning(config: SearchConfig, trial: optuna.trial.Trial | None, epochs: int,
                      milestones: dict[int, float]) -> FidelityPruning:
    """The trial's pruning callback: milestones only for the baseline (it does not compete: search.fidelity) and
    for trainings outside a search trial; a pareto trial reports to the companion study."""

    from syno_automl.search.fidelity import FidelityPruning, make_pruner, open_fidelity_study

    if trial is None or trial.user_attrs.get(V.BASELINE):
        return FidelityPruning(None, milestones=milestones, max_epochs=epochs)
    if len(trial.study.directions) == 1:  # the study's own pruner decides (a NopPruner for --pruner none)
        return FidelityPruning(trial, max_epochs=epochs, milestones=milestones)
    if config.pruner == "none":
        return FidelityPruning(None, milestones=milestones, max_epochs=epochs)
    companion = open_fidelity_study(trial.study, make_pruner(config.pruner, epochs), config.direction)
    return FidelityPruning(trial, companion, max_epochs=epochs, milestones=milestones)
