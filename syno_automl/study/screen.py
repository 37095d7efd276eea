"""A cheap screen of a proposed operator before its full training (issue 14, point 4).

Many operators the search proposes train badly (val_acc 0.1-0.4 against the baseline's 0.99 on digits), and
each costs a full trial to find out. A screen scores the operator in a small fraction of that time and the search prunes
the ones that fail its threshold before training them (``SearchConfig.screen``, ``--screen``):

* ``loss-slope``: from the trial's initialization (same seed, same initial scale matching), `steps` optimizer steps
  with the task's own optimizer on fixed training batches; the score is the operator's loss drop (first loss minus
  the mean of the last quarter) divided by the baseline model's drop over the same steps and batches (1.0: learns
  as fast as the original layers in those steps; <= 0: does not learn).
* ``naswot``: training-free, one forward pass at initialization: the log-determinant of the kernel of the ReLU
  activation patterns over one batch (Mellor et al., "Neural Architecture Search without Training", 2021),
  minus the baseline model's (0: as expressive as the baseline's at init; very negative: many inputs share patterns).

Both are deterministic given the seed. A score that is not finite (a NaN loss, a singular kernel) is ``-inf``:
the operator fails. What the scores predict was measured before a default was chosen (``bench/screen.py``; the
figures and why ``--screen`` stays off by default: docs/search.md, "A cheap screen before training"). naswot ranks
operators better (Spearman 0.78-0.86 with the trained val_acc) at a fifth of loss-slope's cost (0.035 of a trial).

Example:
    >>> from syno_automl.study import SearchConfig, prepare                  # doctest: +SKIP
    >>> screen = Screen(prepare(SearchConfig()), "loss-slope")              # doctest: +SKIP
    >>> screen.score(None, seed=0).score                                      # doctest: +SKIP
    1.0
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import lightning as L
import optuna
import torch
from torch import nn

from syno_automl.errors import OptionError
from syno_automl.settings import SETTING

if TYPE_CHECKING:
    from syno_automl.space import Operator
    from syno_automl.study.context import SearchContext

__all__ = ["Screen", "ScreenResult", "SCREENS", "DEFAULT_THRESHOLDS", "DEFAULT_STEPS", "ScreenedOut"]

SCREENS = tuple(name for name in SETTING["screen"].choices or () if name != "off")
# what an operator must reach to be trained (chosen with bench/screen.py: naswot's scores fall in two clusters,
# collapsed activations below about -46 and the rest above -37; loss-slope 0.1 rejected good operators at width 64)
DEFAULT_THRESHOLDS: dict[str, float] = {"loss-slope": 0.05, "naswot": -40.0}
DEFAULT_STEPS = 16  # digits at batch 64: 23 steps an epoch; 8 steps predicted worse (bench/screen.py)


class ScreenedOut(optuna.TrialPruned):
    """The operator failed the screen: pruned before its full training (the message says score and threshold)."""


@dataclass(frozen=True)
class ScreenResult:
    """One screen: ``score`` (higher is better; compared with ``threshold``), the seconds it took, and what it saw
    (``losses`` per step for loss-slope)."""

    kind: str
    score: float
    threshold: float
    seconds: float
    losses: tuple[float, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return self.score >= self.threshold

    def reason(self) -> str:
        return f"screen {self.kind}: score {self.score:.3f} < {self.threshold:g} ({self.seconds:.2f} s)"


class Screen:
    """Scores operators of a search's space against its baseline model (image task).

    Args:
        context: the search's SearchContext (data, model builder, substitution options).
        kind: one of SCREENS.
        threshold: the score an operator must reach (default: DEFAULT_THRESHOLDS[kind]).
        steps: optimizer steps of loss-slope (its batches: the first `steps` of a loader seeded with the search's
            seed, the same for every operator and the baseline).
    """

    def __init__(self, context: SearchContext, kind: str, threshold: float | None = None,
                 steps: int = DEFAULT_STEPS) -> None:
        if kind not in SCREENS:
            raise OptionError(f"screen must be one of {', '.join(SCREENS)}, got {kind!r}")
        if context.config.task != "image":
            raise OptionError("the screen applies to the image task only")
        if steps < 2:
            raise OptionError(f"a loss slope needs >= 2 steps, got {steps}")
        self.context, self.kind, self.steps = context, kind, int(steps)
        self.threshold = DEFAULT_THRESHOLDS[kind] if threshold is None else float(threshold)
        self._batches: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._reference: float | None = None   # the baseline's raw figure (drop, or log-det)

    # -- public ----------------------------------------------------------------------------------------
    def score(self, target: optuna.trial.Trial | Operator | None, seed: int) -> ScreenResult:
        """The screen of `target` (a search trial, whose operator and attrs are used; an Operator; or None: the
        baseline), initialized with `seed` (the trial's training seed)."""
        started = time.perf_counter()
        raw, losses = self._raw(target, seed)
        reference = self.reference()
        if self.kind == "loss-slope":
            score = raw / reference if reference > 0 else -math.inf
        else:
            score = raw - reference
        if not math.isfinite(score):
            score = -math.inf
        return ScreenResult(self.kind, score, self.threshold, time.perf_counter() - started, losses)

    def reference(self) -> float:
        """The baseline model's raw figure, computed once (seeded with the search's seed)."""
        if self._reference is None:
            self._reference, _ = self._raw(None, self.context.config.seed)
        return self._reference

    # -- the measurements ------------------------------------------------------------------------------
    def _raw(self, target: Any, seed: int) -> tuple[float, tuple[float, ...]]:
        task = self._build(target, seed)
        batches = self._fixed_batches()
        if self.kind == "naswot":
            return _naswot_logdet(task, batches[0][0]), ()
        losses = _train_steps(task, batches)
        if not all(math.isfinite(v) for v in losses):
            return -math.inf, losses
        tail = losses[-max(1, len(losses) // 4):]
        return losses[0] - sum(tail) / len(tail), losses

    def _build(self, target: Any, seed: int) -> L.LightningModule:
        """The task model as the trial's training starts it: seeded, built, the operator substituted (with its
        initial scale matched, as SynoSubstitution does in training)."""
        from syno_automl.search.callbacks import SynoSubstitution
        from syno_automl.study.context import LAYERS, seed_everything

        context = self.context
        seed_everything(seed)
        task = context.task.build(context)
        if target is not None:
            assert context.config.layer is not None  # SearchConfig.__post_init__ gives it the task's default
            substitution = SynoSubstitution(target, LAYERS[context.config.layer], example_input=context.example,
                                            cost_ratio=None, **context.space_options)   # the space holds the budget
            substitution.setup(None, task, "fit")  # type: ignore[arg-type]  # the trainer is read only without example
        return task

    def _fixed_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if self._batches is None:
            generator = torch.Generator().manual_seed(self.context.config.seed % (1 << 63))
            loader = self.context.datamodule.train_dataloader()
            dataset, size = loader.dataset, loader.batch_size or 64
            order = torch.randperm(len(dataset), generator=generator)
            batches = []
            for i in range(self.steps):
                idx = order[(i * size) % len(dataset):][:size].tolist()
                items = [dataset[j] for j in idx]
                batches.append((torch.stack([x for x, _ in items]),
                                torch.stack([torch.as_tensor(y) for _, y in items])))
            self._batches = batches
        return self._batches


def _train_steps(task: L.LightningModule, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, ...]:
    """The training loss of each of `batches`, one optimizer step after each (the task's optimizer, no schedule:
    a cosine schedule over a trial's epochs barely moves in a few steps)."""
    optimizer = _optimizer(task)
    task.train()
    losses: list[float] = []
    for images, labels in batches:
        loss = task._loss(task(images), labels)
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return tuple(losses)


def _optimizer(task: L.LightningModule) -> torch.optim.Optimizer:
    scheduler = task.hparams.get("scheduler")
    try:
        task.hparams.scheduler = "none"   # configure_optimizers then returns the bare optimizer (no trainer needed)
        out = task.configure_optimizers()
    finally:
        if scheduler is not None:
            task.hparams.scheduler = scheduler
    return out["optimizer"] if isinstance(out, dict) else out


def _naswot_logdet(task: L.LightningModule, images: torch.Tensor) -> float:
    """log|K| of the Hamming kernel of the binary ReLU codes of `images` (one forward pass, no gradient)."""
    codes: list[torch.Tensor] = []
    hooks = [m.register_forward_hook(lambda m, args, out: codes.append((out.detach() > 0).flatten(1).float()))
             for m in task.modules() if isinstance(m, nn.ReLU)]
    try:
        task.train()  # BatchNorm with batch statistics, as in training
        with torch.no_grad():
            task(images)
    finally:
        for h in hooks:
            h.remove()
    if not codes:
        raise OptionError("naswot needs ReLU activations in the model")
    c = torch.cat(codes, dim=1).double()
    kernel = c @ c.T + (1 - c) @ (1 - c).T   # units where two inputs agree
    sign, logdet = torch.linalg.slogdet(kernel)
    return float(logdet) if float(sign) > 0 else -math.inf
