"""The search's one training path: a trial's (or a final-stage) training of the task with an operator substituted.

The search and the final stage call :func:`train_operator` through this module's attribute (``training.train_operator``)
at call time, so that a benchmark may put a cache in its place (bench/discovery.py).
"""
from __future__ import annotations

from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.search.callbacks import SynoSubstitution
from syno_automl.space import Operator
from syno_automl.study.context import LAYERS, SearchContext, seed_everything

__all__ = ["train_operator"]


def train_operator(context: SearchContext, trial: optuna.trial.Trial | None, run: Any | None, *,
                   epochs: int, operator: Operator | None = None, milestones: dict[int, float] | None = None,
                   timeout: float | None = -1.0, steps: int | None = None) -> float:
    """Trains the task with the trial's (or `operator`'s) operator substituted; returns the last val_acc (image)
    or val_loss (lm).

    Logs per-epoch (image) or per-step (lm) metrics and FLOPs/params/flops_ratio to `run` when given.
    image: `epochs`; `timeout`: -1 for the config's trial_timeout, None or 0 for no limit (over it: failed).
    lm: `steps` (default the config's max_steps); `timeout`: -1 for the config's time_budget, None or 0 for
    none (at the budget training stops and the model is validated). Raises optuna.TrialPruned when the pruner
    (config.pruner, FidelityPruning) or a milestone says so, OperatorBuildError/BudgetExceededError,
    NonFiniteLossError, TrainingTooSlowError.
    """
    config = context.config
    assert config.layer is not None  # SearchConfig.__post_init__ gives it the task's default
    seed_everything(config.seed + (trial.number if trial is not None else 0))
    substitution = SynoSubstitution(operator if operator is not None else trial, LAYERS[config.layer],
                                    example_input=context.example,
                                    flops_ratio=None if operator is not None else context.budgets.flops,
                                    # the search's space already holds the budgets: the trial's own
                                    # substitution only sizes the operator (no cost budget of its own)
                                    cost_ratio=None, **context.space_options)
    value = context.task.train(context, trial, run, substitution, epochs=epochs, milestones=milestones,
                                  timeout=timeout, steps=steps)
    _log_weights(run, substitution)
    return value


def _log_weights(run: Any | None, substitution: SynoSubstitution) -> None:
    """The trained operator weights (and added biases) of every replaced layer: the run's ``weights.pt``, read
    by ``syno-automl export --weights`` (keys as in the exported SynoLayer's state_dict)."""
    sub = substitution.substitution
    if run is None or sub is None or substitution.operator is None:
        return
    layers = [{"name": name, "kind": ph.kind, "mapping": sub.space.mapping(i), "bias": ph.bias is not None,
               "state": {k: v.detach().cpu().clone() for k, v in ph.state_dict().items()}}
              for i, (name, ph) in enumerate(sub.placeholders)]
    run.log_torch({"operator": substitution.operator.hash, "layers": layers}, V.ARTIFACT_WEIGHTS)
