"""Lightning callbacks: put a trial's operator into the model, prune trials that learn too slowly, log epoch
metrics to a trial's MLflow run (time limits: syno_automl.search.time_limits).

Both work in a user's own Trainer:

    trainer = L.Trainer(max_epochs=10, callbacks=[SynoSubstitution(trial, layer=nn.Conv2d, flops_ratio=0.5),
                                                   SynoPruning(trial, monitor="val_acc", milestones={1: 0.2})])
    trainer.fit(task, datamodule)
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import lightning as L
import optuna
import torch
from torch import nn

from syno_automl import vocabulary as V
from syno_automl.errors import MissingMetricError, OptionError, OptionTypeError, SubstitutionError, SynoError
from syno_automl.optuna_private import set_user_attrs
from syno_automl.placeholder import Substitution, call_with, substitute
from syno_automl.search.sampler import suggest_operator
from syno_automl.space import Operator

if TYPE_CHECKING:
    from syno_automl.tracking import TrialRun

__all__ = ["SynoSubstitution", "SynoPruning", "EpochMetricsLogger", "OperatorBuildError", "BudgetExceededError",
           "TrainingTooSlowError", "NoExampleInputError", "example_batch", "match_output_scale", "substituted_module"]


class OperatorBuildError(SynoError, RuntimeError):
    """The operator's PyTorch module could not be built or run on the model's layers."""


class BudgetExceededError(SynoError, ValueError):
    """The operator needs more FLOPs than the budget allows relative to the layers it replaces."""


class TrainingTooSlowError(SynoError, TimeoutError):
    """Training would take (or took) longer than the trial's time limit."""


class NoExampleInputError(SynoError, ValueError):
    """SynoSubstitution found no batch to record the replaced layers' sizes with."""


def example_batch(trainer: L.Trainer, pl_module: L.LightningModule) -> Any:
    """One input batch for a forward pass: the first training batch of what ``fit`` was given (a datamodule, or
    ``train_dataloaders``; its first element when the batch is an (inputs, targets) pair), else
    ``pl_module.example_input_array``."""
    loader = None
    datamodule = getattr(trainer, "datamodule", None)
    if datamodule is not None:
        loader = datamodule.train_dataloader()
    else:
        # fit(model, train_dl, val_dl): Lightning keeps the loaders it was given in the fit loop's data source (no
        # public accessor before the loop starts, and the substitution must happen before the optimizer exists)
        source = getattr(getattr(trainer, "fit_loop", None), "_data_source", None)
        if source is not None and getattr(source, "instance", None) is not None and source.is_defined():
            loader = source.dataloader()
    if loader is not None:
        batch = next(iter(loader))
        return batch[0] if isinstance(batch, (tuple, list)) else batch
    example = getattr(pl_module, "example_input_array", None)
    if example is not None:
        return example
    raise NoExampleInputError("SynoSubstitution needs example_input=..., data passed to fit() (a datamodule or "
                              "train_dataloaders), or pl_module.example_input_array to record the layers' sizes")


def substituted_module(pl_module: nn.Module, layer: type | tuple[type, ...]) -> nn.Module:
    """What SynoSubstitution substitutes in and runs the example through: `pl_module` when it defines ``forward``,
    else its one child module holding `layer` layers (a LightningModule whose steps call ``self.model(x)``)."""
    if type(pl_module).forward not in (L.LightningModule.forward, nn.Module.forward):
        return pl_module
    holders = [name for name, child in pl_module.named_children()
               if any(isinstance(m, layer) for m in child.modules())]
    if len(holders) != 1:
        kinds = " / ".join(t.__name__ for t in (layer if isinstance(layer, tuple) else (layer,)))
        found = f"{len(holders)} ({', '.join(holders)})" if holders else "none"
        raise SubstitutionError(f"{type(pl_module).__name__} has no forward(): SynoSubstitution then substitutes in "
                                f"its one child module holding {kinds} layers and runs the example through it, and "
                                f"it has {found}; define forward()")
    return getattr(pl_module, holders[0])


def _placeholder_inputs(sub: Substitution, module: nn.Module, example: Any) -> list[torch.Tensor | None]:
    """Each placeholder's input during one forward pass of `module` (eval mode, no grad)."""
    seen: list[torch.Tensor | None] = [None] * len(sub.placeholders)
    hooks = [ph.register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(i, args[0].detach()))
             for i, (_, ph) in enumerate(sub.placeholders)]
    was_training = module.training
    try:
        module.eval()
        with torch.no_grad():
            call_with(module, example)
    finally:
        module.train(was_training)
        for h in hooks:
            h.remove()
    return seen


def match_output_scale(sub: Substitution, modules: Sequence[nn.Module], inputs: Sequence[torch.Tensor | None]) -> None:
    """Rescales each operator module's weights so that its initial output has the standard deviation of the
    layer it replaces on the same input (each of K weights by ratio ** (1/K)). Operators then start on an
    equal footing with the original layer: with BatchNorm after a layer, SGD's effective learning rate
    depends on the weights' scale, and a 2.5x larger initial scale trains several times slower."""
    with torch.no_grad():
        for (_, ph), module, x in zip(sub.placeholders, modules, inputs):
            weights = [p for p in module.parameters() if p.requires_grad]
            if x is None or not weights or ph.referred_layer is None:
                continue
            ref = ph.referred_layer(x).float().std()
            out = module(x.reshape(-1, x.shape[-1]) if ph.kind == "linear" else x).float().std()
            if not (torch.isfinite(ref) and torch.isfinite(out)) or ref <= 0 or out <= 0:
                continue
            if out < 1e-3 * ref:  # output constant on this data (e.g. a mean over LayerNorm'd features): its
                continue          # std is rounding noise, and scaling it up by ~1e6 made LM trials go NaN
            factor = float(ref / out) ** (1.0 / len(weights))
            for p in weights:
                p.mul_(factor)


class SynoSubstitution(L.Callback):
    """Replaces the model's `layer` layers by the operator in ``setup``, before the optimizer is created.

    Args:
        trial_or_operator: an Optuna trial of a SynoSampler study (its operator is taken with
            ``suggest_operator``; a baseline trial keeps the original layers), an Operator, or None (baseline).
        layer: the layer type substituted (``nn.Conv2d`` or ``nn.Linear``).
        example_input: one input batch; default: the datamodule's first training batch.
        flops_ratio: if given, the operator's FLOPs over the replaced layers' must not exceed it
            (BudgetExceededError otherwise).
        match_scale: rescale the operator's initial weights so that its output matches the replaced layer's
            output scale on the example batch (see match_output_scale); False keeps the code generator's init.
        substitution: the Substitution the study's space came from (``sub = substitute(model, ...)``): its layer
            types and every choice made there (``where``, budgets, ``groups``, ``kernel_sizes``, ``target``...)
            are made again here, so the space is the operator's. ``layer`` and ``substitute_options`` given
            beside it win.
        substitute_options: passed to ``placeholder.substitute`` (``where``, ``max_depth``, ``kernel_sizes``...);
            they must describe the same space as the one the operator comes from (``check`` is off: the operator
            is at hand).

    The module substituted and run on the example is ``pl_module`` when it defines ``forward``; a
    LightningModule without one (its steps call ``self.model(x)``) has its one child module that holds layers
    of the type substituted instead (qualified names, and so ``where`` globs, are then relative to that child,
    as in ``substitute(model)`` on it); several such children are refused (SubstitutionError): define ``forward``.

    After setup, ``substitution`` (the Substitution), ``operator``, ``flops``, ``params``, ``baseline_flops``
    and ``flops_ratio_used`` describe what was done; a trial also gets them as user attrs.

    Example:
        >>> cb = SynoSubstitution(None, layer=nn.Conv2d)   # baseline: measures, replaces nothing
        >>> cb.operator is None
        True
    """

    def __init__(self, trial_or_operator: optuna.trial.Trial | Operator | None,
                 layer: type | tuple[type, ...] | None = None, *, example_input: Any = None,
                 flops_ratio: float | None = None, match_scale: bool = True, substitution: Substitution | None = None,
                 **substitute_options: Any) -> None:
        super().__init__()
        if substitution is not None:
            if not isinstance(substitution, Substitution):
                raise OptionTypeError(f"substitution= takes the Substitution that substitute() returns, got "
                                      f"{type(substitution).__name__}")
            substitute_options = {**substitution.options, **substitute_options}
            layer = layer if layer is not None else substitution.layer_types
        substitute_options.setdefault("check", False)  # the operator is at hand: the space is not empty
        self.trial = trial_or_operator if isinstance(trial_or_operator, optuna.trial.Trial) else None
        self.operator: Operator | None = trial_or_operator if isinstance(trial_or_operator, Operator) else None
        if trial_or_operator is not None and self.trial is None and self.operator is None:
            raise OptionTypeError(f"SynoSubstitution needs an optuna Trial, an Operator or None, got "
                            f"{type(trial_or_operator).__name__}")
        self.layer = layer if layer is not None else nn.Conv2d
        self.example_input = example_input
        self.max_flops_ratio = flops_ratio
        self.match_scale = match_scale
        self.substitute_options = substitute_options
        self.substitution: Substitution | None = None
        self.flops: int | None = None
        self.params: int | None = None
        self.baseline_flops: int | None = None
        self.flops_ratio_used: float | None = None
        self.cost: dict[str, float] = {}   # planned cost figures (Operator.cost) summed over the placeholders
        self._done_for: int | None = None

    def _is_baseline(self) -> bool:
        return self.trial is not None and bool(self.trial.user_attrs.get(V.BASELINE))

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._done_for == id(pl_module):
            return  # fit then validate/test with the same module: substitute once
        if self.trial is not None and not self._is_baseline():
            self.operator = suggest_operator(self.trial)
        example = self.example_input if self.example_input is not None else example_batch(trainer, pl_module)
        module = substituted_module(pl_module, self.layer)
        # where the module's weights are now: at `setup` Lightning may already report the accelerator as
        # pl_module.device while the weights are still on the CPU (they move after the setup hooks)
        where = next(iter(module.parameters()), None)
        device = where.device if where is not None else pl_module.device
        example = example.to(device) if isinstance(example, torch.Tensor) else example
        sub = substitute(module, self.layer, example, **self.substitute_options)
        self.substitution = sub
        self.baseline_flops = sub.baseline_flops
        if self.operator is None:
            self.flops, self.flops_ratio_used = sub.baseline_flops, 1.0
            self.params = sum(p.numel() for _, ph in sub.placeholders for p in ph.referred_layer.parameters())
            sub.restore()
        else:
            op = self.operator
            try:
                self.flops = sub.operator_flops(op)
                self.params = sub.operator_params(op)
            except Exception as e:
                sub.restore()
                raise OperatorBuildError(f"operator {op.hash}: cannot size it for the model's layers: {e}") from e
            self.flops_ratio_used = self.flops / sub.baseline_flops if sub.baseline_flops else math.inf
            self.cost = _cost_figures(sub, op)
            if self.max_flops_ratio is not None and self.flops_ratio_used > self.max_flops_ratio * (1 + 1e-9):
                sub.restore()
                raise BudgetExceededError(f"operator {op.hash} needs {self.flops_ratio_used:.3f}x the FLOPs of the "
                                          f"replaced layers, above the budget {self.max_flops_ratio}x")
            try:
                inputs = _placeholder_inputs(sub, module, example) if self.match_scale else []
                modules = sub.apply(op)
                if self.match_scale:
                    match_output_scale(sub, modules, inputs)
                with torch.no_grad():  # fail here, with the operator named, rather than in the first step
                    was_training = module.training
                    module.eval()
                    call_with(module, example)
                    module.train(was_training)
            except Exception as e:
                sub.restore()
                raise OperatorBuildError(f"operator {op.hash} failed to build or run: {type(e).__name__}: {e}") \
                    from e
        self._done_for = id(pl_module)
        if self.trial is not None:   # one storage write, not one per attr
            set_user_attrs(self.trial, {V.FLOPS: self.flops, V.PARAMS: self.params,
                                        V.BASELINE_FLOPS: self.baseline_flops, V.FLOPS_RATIO: self.flops_ratio_used,
                                        **{f"syno.{key}": value for key, value in self.cost.items()}})

    def cost_metrics(self) -> dict[str, float]:
        """The operator's cost figures for MLflow (cost, cost_ratio, materialized, peak); empty for the baseline."""
        return dict(self.cost)


def _cost_figures(sub: Substitution, op: Operator) -> dict[str, float]:
    """Planned cost of `op` over the substitution's placeholders: summed total and materialized, largest peak."""
    costs = sub.operator_costs(op)
    total = sum(c["total"] for c in costs)
    return {"cost": total, "cost_ratio": total / sub.baseline_cost if sub.baseline_cost else math.inf,
            "materialized": sum(c["materialized"] for c in costs), "peak": max(c["peak"] for c in costs)}


class SynoPruning(L.Callback):
    """Reports ``monitor`` to the trial after every validation epoch and prunes the trial when it falls
    below an accuracy milestone (``{epoch: min_value}``, epochs counted from 1, as the original's early
    termination) or when the study's pruner says so.

    For a minimized monitor (a loss) pass ``mode="min"``: a milestone is then a maximum. Multi-objective
    studies cannot report intermediate values; only the milestones apply there.

    Example:
        >>> SynoPruning(None, milestones={1: 0.2, 3: 0.5}).milestones
        {1: 0.2, 3: 0.5}
    """

    def __init__(self, trial: optuna.trial.Trial | None, monitor: str = "val_acc",
                 milestones: Mapping[int, float] | None = None, mode: str = "max",
                 use_pruner: bool = True) -> None:
        super().__init__()
        if mode not in ("max", "min"):
            raise OptionError(f"mode must be 'max' or 'min', got {mode!r}")
        self.trial = trial
        self.monitor = monitor
        self.milestones = {int(k): float(v) for k, v in (milestones or {}).items()}
        if any(k < 1 for k in self.milestones):
            raise OptionError(f"milestone epochs count from 1, got {sorted(self.milestones)}")
        self.mode = mode
        self.use_pruner = use_pruner
        self.history: list[float] = []

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        seen = self._observe(trainer)
        if seen is None:
            return
        value, epoch = seen
        if self.trial is not None and len(self.trial.study.directions) == 1:
            self.trial.report(value, step=epoch)
        self._check_milestone(value, epoch)
        if (self.trial is not None and self.use_pruner and len(self.trial.study.directions) == 1
                and self.trial.should_prune()):
            raise optuna.TrialPruned(f"{self.monitor}={value:.4f} at epoch {epoch}: pruned by the study's pruner")

    def _observe(self, trainer: L.Trainer) -> tuple[float, int] | None:
        """(value, epoch counted from 1) of this validation, kept in `history`; None in the sanity check."""
        if trainer.sanity_checking:
            return None
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            raise MissingMetricError(f"{type(self).__name__} monitors {self.monitor!r} but the module logged only "
                           f"{sorted(trainer.callback_metrics)}")
        self.history.append(float(value))
        return float(value), trainer.current_epoch + 1

    def _check_milestone(self, value: float, epoch: int) -> None:
        threshold = self.milestones.get(epoch)
        if threshold is not None and (value < threshold if self.mode == "max" else value > threshold):
            sign = "<" if self.mode == "max" else ">"
            raise optuna.TrialPruned(f"{self.monitor}={value:.4f} {sign} {threshold} at epoch {epoch} (milestone)")


class EpochMetricsLogger(L.Callback):
    """Logs the module's epoch metrics (``val_acc``, ``val_loss``, ``train_loss``...) to a run, step = epoch.

    Example:
        >>> L.Trainer(callbacks=[EpochMetricsLogger(run)])   # doctest: +SKIP
    """

    def __init__(self, run: TrialRun, names: tuple[str, ...] = ("val_acc", "val_loss")) -> None:
        super().__init__()
        self.run = run
        self.names = names

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        self.run.log_metrics({k: float(metrics[k]) for k in self.names if k in metrics},
                             step=trainer.current_epoch + 1)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        loss = trainer.callback_metrics.get("train_loss")
        if loss is not None:
            self.run.log_metrics({"train_loss": float(loss)}, step=trainer.current_epoch + 1)
