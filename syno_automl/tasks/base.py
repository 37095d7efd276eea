"""What a search task is: the part of a search that differs between image classification and language modelling.

The search (syno_automl.study, syno_automl.search) knows no task by name: it asks the config's task object
(:func:`syno_automl.tasks.task_of`) for the data, the Lightning module, the reward, how a trial trains, what a
trial's line adds, the sizes latency is measured at and the final stage's budget. A task object holds no state:
one instance per task, shared.

Nothing here imports torch, Lightning or Optuna at import time: ``syno_automl.config`` reads the objective's name
and direction from here before the heavy imports.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from syno_automl.config import SearchConfig
    from syno_automl.runtime import Device
    from syno_automl.search.reward import Reward

__all__ = ["Task", "TrainingContext"]


class TrainingContext(Protocol):
    """What a task's training reads of the search: the config and its resolved device, the data, one example batch
    and the sizes the model is built at (syno_automl.study.context.SearchContext has them)."""

    @property
    def config(self) -> SearchConfig: ...
    @property
    def device(self) -> Device: ...
    @property
    def datamodule(self) -> Any: ...
    @property
    def example(self) -> Any: ...
    @property
    def num_classes(self) -> int: ...
    @property
    def in_channels(self) -> int: ...


class Task:
    """One search task. Subclasses set the names and override the methods that differ.

    Example:
        >>> from syno_automl.tasks import task_of
        >>> from syno_automl.config import SearchConfig
        >>> task_of(SearchConfig(task="lm")).objective_name
        'val_loss'
    """

    name: str = ""
    objective_name: str = ""         # the trial's value: the primary objective of the study
    direction: str = "maximize"      # of the primary objective
    final_metric: str = ""           # what the final stage's verdict calls the value
    prunes_in_study: bool = True     # whether a single-objective study prunes its trials with its own pruner
    counts_tokens: bool = False      # the final stage reports tokens/s beside the speedup

    def datamodule_kwargs(self, config: SearchConfig) -> dict[str, Any]:
        """Keyword arguments for lightning_modules.build_datamodule beside the batch size."""
        raise NotImplementedError

    def sizes(self, datamodule: Any) -> tuple[int, int]:
        """(num_classes, in_channels) of the model the datamodule feeds."""
        raise NotImplementedError

    def check_model(self, config: SearchConfig, probe: Any) -> None:
        """Raises ValueError when the settings do not fit the model built for them."""

    def build_module(self, config: SearchConfig, model: Any, num_classes: int) -> Any:
        """The Lightning module that trains `model`."""
        raise NotImplementedError

    def build_model(self, config: SearchConfig, num_classes: int, in_channels: int) -> Any:
        """A fresh model of the config (lightning_modules' zoo)."""
        from lightning_modules import build_model

        assert config.model is not None  # SearchConfig.__post_init__ gives it the task's default
        return build_model(config.model, num_classes, in_channels)

    def build(self, context: TrainingContext) -> Any:
        """The Lightning module of a fresh model: what a training fits."""
        return self.build_module(context.config, self.build_model(context.config, context.num_classes,
                                                                  context.in_channels), context.num_classes)

    def reward(self, config: SearchConfig, num_classes: int) -> Reward:
        """The sampler's reward of a trial's value (before the pareto credit for speed)."""
        raise NotImplementedError

    def train(self, context: TrainingContext, trial: Any | None, run: Any | None, substitution: Any, *, epochs: int,
              milestones: dict[int, float] | None, timeout: float | None, steps: int | None) -> float:
        """Trains the task with `substitution` (a SynoSubstitution callback); returns the trial's value (see
        syno_automl.study.training.train_operator for the arguments)."""
        raise NotImplementedError

    def budget_label(self, config: SearchConfig) -> str:
        """A trial's training budget in words: ``3 epochs``, ``200 steps``."""
        raise NotImplementedError

    def trial_line(self, trial: Any, run: Any | None, baseline: bool) -> str:
        """What a finished trial's progress line adds ('' for nothing)."""
        return ""

    def latency_sizes(self, config: SearchConfig) -> dict[str, int]:
        """The operator's sizes when its latency is measured (inference sizes)."""
        raise NotImplementedError

    def near_chance(self, value: float, num_classes: int) -> str | None:
        """Why a baseline `value` is too close to chance for trials to rank operators (None: it is not)."""
        return None

    def trial_budget(self, config: SearchConfig) -> int:
        """What a search trial trains for, in the unit of :meth:`final_budget`."""
        raise NotImplementedError

    def final_budget(self, config: SearchConfig) -> tuple[int, str]:
        """What every finalist and the baseline train for, per seed: (budget, unit)."""
        raise NotImplementedError

    def final_changes(self, budget: int) -> dict[str, Any]:
        """Config changes for a final-stage training of `budget` units."""
        return {}

    def final_steps(self, budget: int) -> int | None:
        """The `steps` argument of a final-stage training of `budget` units (None: not counted in steps)."""
        return None

    def timing_batch(self, datamodule: Any, example: Any) -> Any:
        """The inputs the final stage times the whole models on (read once, by the context's prepare)."""
        return example

    def timing_label(self, example: Any) -> str:
        """How the timing batch is described in the final stage's table."""
        return f"batch {int(example.shape[0])}"
