"""How long a trial may train: a safety net that fails a runaway trial (SlowTrialGuard, judged against the
baseline model's step in this process, so load does not decide) and a time budget that stops training gracefully
(TrainingTimeBudget, the lm task's fixed time per operator). Both are Lightning callbacks for any Trainer."""
from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Timer
from torch import nn

from syno_automl.errors import OptionError, OptionTypeError
from syno_automl.search.callbacks import TrainingTooSlowError

__all__ = ["SlowTrialGuard", "TrainingTimeBudget", "relative_step_time"]


class SlowTrialGuard(L.Callback):
    """A safety net against runaway trials; raises TrainingTooSlowError.

    With `baseline` (the unsubstituted model, or a factory of it) the decision does not depend on machine
    load: after `probe_steps` steps, one forward+backward of the trained model and of the baseline are timed
    alternately on the same batch, in this process, in CPU time (another process's load does not count, and
    a loaded machine slows both alike), and the trial fails only when the ratio exceeds `max_slowdown`
    (default 100x, a generous multiple: operators inside the search's budgets run within a few x of the
    baseline, so none sits near the limit where measurement noise could flip the decision; hence one timed step
    each after a warm-up by default, `repeats`: 3 took 0.92-1.02 s of CPU and 1 takes 0.49-0.50 s with the default
    model on a batch of 64 digits, one thread, where a trial of the default search takes a few seconds). The wall
    clock then only stops a trial that runs `overrun` times longer than its own projection at the probe (the load
    tripled mid-trial) *and* longer than `seconds`. Without `baseline` the total time is projected from the steps
    after the first (warm-up) and compared with `seconds`, an absolute clock, as for a user's own Trainer.

    Example:
        >>> SlowTrialGuard(60).seconds
        60.0
    """

    def __init__(self, seconds: float | None = None, probe_steps: int = 3, *,
                 baseline: nn.Module | Callable[[], nn.Module] | None = None, max_slowdown: float = 100.0,
                 overrun: float = 3.0, repeats: int = 1) -> None:
        super().__init__()
        if seconds is None and baseline is None:
            raise OptionError("SlowTrialGuard needs seconds=..., baseline=..., or both")
        if seconds is not None and not seconds > 0:
            raise OptionError(f"the time limit must be positive, got {seconds}")
        if not max_slowdown > 1 or not overrun >= 1 or probe_steps < 2 or repeats < 1:
            raise OptionError("need max_slowdown > 1, overrun >= 1, probe_steps >= 2, repeats >= 1")
        self.seconds = None if seconds is None else float(seconds)
        self.probe_steps, self.max_slowdown, self.overrun, self.repeats = probe_steps, max_slowdown, overrun, repeats
        self._baseline = baseline
        self.slowdown: float | None = None   # measured at the probe (with a baseline)
        self._start: float | None = None
        self._first_step_end: float | None = None
        self._limit: float | None = self.seconds
        self._steps = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        import time

        self._start, self._steps, self._limit, self.slowdown = time.monotonic(), 0, self.seconds, None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        import time

        if self._start is None:
            return
        self._steps += 1
        now = time.monotonic()
        elapsed = now - self._start
        if self._steps == 1:
            self._first_step_end = now
        total = trainer.estimated_stepping_batches
        if self._steps == self.probe_steps and math.isfinite(total):
            assert self._first_step_end is not None  # set at step 1, and probe_steps >= 2
            per_step = (now - self._first_step_end) / (self._steps - 1)   # the first step warms up: not counted
            projected = elapsed + per_step * (total - self._steps)
            if self._baseline is not None:
                self.slowdown = relative_step_time(pl_module, self._baseline, batch, repeats=self.repeats)
                if self.slowdown > self.max_slowdown:
                    raise TrainingTooSlowError(
                        f"a training step takes {self.slowdown:.0f}x the baseline model's (CPU time, both timed now "
                        f"in this process), over the {self.max_slowdown:g}x limit")
                self._limit = max(self.seconds or 0.0, self.overrun * projected)
            elif projected > self.seconds:
                raise TrainingTooSlowError(f"training would take about {projected:.0f} s ({per_step:.2f} s "
                                           f"per step), over the {self.seconds:.0f} s limit")
        if self._limit is not None and elapsed > self._limit:
            raise TrainingTooSlowError(f"training stopped at the {self._limit:.0f} s limit after {self._steps} steps")


def _detached_copy(module: nn.Module) -> nn.Module:
    """A deep copy of `module`; a LightningModule's trainer (data, loops) is left out of the copy."""
    import copy

    trainer = getattr(module, "_trainer", None)
    if trainer is not None:
        module._trainer = None
    try:
        return copy.deepcopy(module)
    finally:
        if trainer is not None:
            module._trainer = trainer


def relative_step_time(module: nn.Module, baseline: nn.Module | Callable[[], nn.Module], batch: Any, *,
                       repeats: int = 3) -> float:
    """Seconds of one forward+backward of `module` over the same for `baseline`, on the inputs of `batch`.

    Copies of both are timed alternately (one warm-up each, then the median of `repeats`) in this process's CPU
    time (on a GPU: wall time, synchronized), so other processes' load hardly counts and what remains slows both
    alike; the copies leave the trained module's gradients, statistics and RNG untouched.
    """
    import copy
    import statistics
    import time

    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    if not isinstance(x, torch.Tensor):
        raise OptionTypeError("relative_step_time needs a tensor batch (or an (inputs, targets) pair), "
                        f"got {type(x).__name__}")
    x = x.detach()
    times: dict[str, list[float]] = {"module": [], "baseline": []}
    # on a GPU the step runs on the device: wall time after a synchronize (CPU time would count only the launches)
    cuda = x.device.type == "cuda"
    clock = time.perf_counter if cuda else time.process_time
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []):
        models = {"module": _detached_copy(module),
                  "baseline": copy.deepcopy(baseline) if isinstance(baseline, nn.Module) else baseline()}
        for m in models.values():
            m.to(x.device).train()   # the baseline factory builds on the CPU; the batch is where training runs
        for round_ in range(repeats + 1):
            for name, m in models.items():
                sync()
                started = clock()
                out = m(x)
                (out[0] if isinstance(out, (tuple, list)) else out).float().sum().backward()
                sync()
                if round_:   # round 0 warms up
                    times[name].append(clock() - started)
                m.zero_grad(set_to_none=True)
    return statistics.median(times["module"]) / max(statistics.median(times["baseline"]), 1e-9)


class TrainingTimeBudget(Timer):
    """Stops training gracefully once `seconds` of wall time (validation included) have passed since the start:
    a fixed time per operator, as the paper gave each language-model operator, so a faster operator trains
    more steps. Unlike SlowTrialGuard nothing fails; ``stopped`` and ``steps`` say what happened.

    This is the Timer that ``Trainer(max_time=...)`` installs (checked after every step), plus the positive
    check and the ``stopped``/``steps`` record the trial's MLflow tag needs.

    Example:
        >>> TrainingTimeBudget(30).seconds
        30.0
    """

    def __init__(self, seconds: float) -> None:
        if not seconds > 0:
            raise OptionError(f"the time budget must be positive, got {seconds}")
        super().__init__(duration=timedelta(seconds=float(seconds)), interval="step", verbose=False)
        self.seconds = float(seconds)
        self.stopped = False
        self.steps = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self.steps, self.stopped = 0, False

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any, **kwargs: Any) -> None:
        self.steps += 1
        already = trainer.should_stop
        super().on_train_batch_end(trainer, *args, **kwargs)
        self.stopped = self.stopped or (trainer.should_stop and not already)
