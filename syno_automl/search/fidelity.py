"""Multi-fidelity over epochs: Optuna's own pruners stop the operators that learn slower than the others.

`make_pruner` builds Optuna's HyperbandPruner or SuccessiveHalvingPruner over epochs (min_resource 1,
max_resource the trial's epochs, reduction factor 2); `FidelityPruning` is the Lightning callback that reports
the validation accuracy after every epoch and raises ``optuna.TrialPruned`` when the pruner says so.

Optuna's pruners refuse multi-objective studies (``trial.report`` raises there), so a pareto search keeps a
**companion** single-objective study in the same storage, named ``<study>.fidelity`` (vocabulary
FIDELITY_SUFFIX), in the direction of the accuracy: each operator trial asks one companion trial, reports its
per-epoch values there, and the companion study's pruner decides. The companion trial ends COMPLETE, PRUNED or
FAIL with the search trial; the two point at each other (user attrs ``syno.fidelity_trial`` on the search trial,
``syno.search_trial`` on the companion's). An accuracy (single-objective) search reports to its own trials, and
its study's pruner decides.

The baseline trial does not report: the original layers outlearn nearly every operator at epoch 1, so with them
among the competitors the first rung would prune almost everything; operators compete with operators.

With 2-3 epochs Hyperband has little room: with reduction factor 2 and max_resource = epochs it makes 2 brackets,
one whose trials are judged after epoch 1 (kept when in the better half of their rung), one whose first rung is
at epoch 2 (with 2 epochs: never judged, the final epoch is never pruned, its result is complete).

Example:
    >>> type(make_pruner("halving", epochs=3)).__name__
    'SuccessiveHalvingPruner'
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import lightning as L
import optuna
from optuna.trial import Trial, TrialState

from syno_automl import vocabulary as V
from syno_automl.errors import OptionError
from syno_automl.optuna_private import storage_of
from syno_automl.search.callbacks import SynoPruning

__all__ = ["make_pruner", "fidelity_study_name", "open_fidelity_study", "FidelityPruning", "REDUCTION_FACTOR"]

REDUCTION_FACTOR = 2  # with 2-3 epochs, keep the better half: a third would keep 1 in 3 after a single epoch


def make_pruner(name: str, epochs: int) -> optuna.pruners.BasePruner:
    """``hyperband``, ``halving`` (successive halving) over epochs 1..`epochs`, or ``none``."""
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=REDUCTION_FACTOR,
                                                      min_early_stopping_rate=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(int(epochs), 1),
                                              reduction_factor=REDUCTION_FACTOR)
    raise OptionError(f"pruner must be one of hyperband, halving, none; got {name!r}")


def fidelity_study_name(study_name: str) -> str:
    """The companion study of a pareto search: ``syno`` -> ``syno.fidelity``."""
    return study_name + V.FIDELITY_SUFFIX


def open_fidelity_study(study: optuna.Study, pruner: optuna.pruners.BasePruner,
                        direction: str = "maximize") -> optuna.Study:
    """The companion study of `study` (created on first use, in the same storage)."""
    return optuna.create_study(study_name=fidelity_study_name(study.study_name), storage=storage_of(study),
                               direction=direction, pruner=pruner, load_if_exists=True,
                               sampler=optuna.samplers.RandomSampler(seed=0))  # it samples nothing


class FidelityPruning(SynoPruning):
    """SynoPruning for the search: reports ``monitor`` after every validation epoch (to the trial, or to its
    companion trial) and prunes when the pruner says so (never after the last epoch: that trial's training is
    done, its result complete), or when the value misses a milestone
    (``{epoch: min_value}``, an absolute floor, off by default).

    Args:
        trial: the search trial (None: milestones only, e.g. the baseline or a re-evaluation).
        companion: the companion study (multi-objective search): the trial reports to a companion trial there.
        max_epochs: the trial's epochs (the last one is never pruned).

    Example:
        >>> FidelityPruning(None, milestones={1: 0.2}).milestones
        {1: 0.2}
    """

    def __init__(self, trial: Trial | None, companion: optuna.Study | None = None, *, monitor: str = "val_acc",
                 max_epochs: int | None = None, milestones: Mapping[int, float] | None = None,
                 mode: str = "max") -> None:
        if trial is not None and companion is None and len(trial.study.directions) > 1:
            raise OptionError("a multi-objective trial cannot report intermediate values: pass companion=")
        super().__init__(trial, monitor=monitor, milestones=milestones, mode=mode, use_pruner=False)
        self.companion, self.max_epochs = companion, max_epochs
        self.target: Trial | None = None   # where values are reported: the trial, or its companion trial

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.trial is None or self.target is not None:
            return
        if self.companion is None:
            self.target = self.trial
            return
        with warnings.catch_warnings():  # a heartbeat storage warns that ask() is not optimize(): by design here
            warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")
            self.target = self.companion.ask()
        self.target.set_user_attr(V.SEARCH_TRIAL, self.trial.number)
        self.trial.set_user_attr(V.FIDELITY_TRIAL, self.target.number)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        seen = self._observe(trainer)
        if seen is None:
            return
        value, epoch = seen
        if self.target is not None:
            self.target.report(value, step=epoch)
        self._check_milestone(value, epoch)
        last = self.max_epochs if self.max_epochs is not None else trainer.max_epochs
        if self.target is not None and (last is None or epoch < last) and self.target.should_prune():
            pruner = type(self.target.study.pruner).__name__
            raise optuna.TrialPruned(f"{self.monitor}={value:.4f} at epoch {epoch}: pruned by {pruner}")

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._finish(TrialState.COMPLETE if self.history else TrialState.FAIL)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._finish(TrialState.PRUNED if isinstance(exception, optuna.TrialPruned) else TrialState.FAIL)

    def _finish(self, state: TrialState) -> None:
        """Ends the companion trial with the search trial (its own trial is ended by the search)."""
        target, self.target = self.target, None
        if self.companion is None or target is None:
            return
        values: Any = self.history[-1] if state == TrialState.COMPLETE else None
        try:
            self.companion.tell(target, values, state=state)
        except ValueError:  # a non-finite last value: Optuna refuses it as a COMPLETE value
            self.companion.tell(target, state=TrialState.FAIL)
