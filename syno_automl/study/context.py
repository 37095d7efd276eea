"""The resolved run context (SearchContext): what every trial of a search shares, each value resolved once.

:func:`prepare` turns a config into it: it validates the config, resolves the task object, the device (``auto``
by one rule, syno_automl.runtime.device), the speed targets (parsed) and the budgets (a record apart from the
space options), loads the task's data and builds the operator space from one real forward pass of the model.
Everything downstream reads these and re-derives nothing from the config's strings.
"""
from __future__ import annotations

import functools
import os
import random
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from syno_automl.config import SearchConfig
from syno_automl.errors import SubstitutionError
from syno_automl.placeholder import Substitution, substitute
from syno_automl.runtime import Device, SpeedTarget, parse_target, resolve_device
from syno_automl.space import OperatorSpace
from syno_automl.speed.process import speed_process_of
from syno_automl.speed.subject import SpeedSubject, precision_name
from syno_automl.tasks import Task, task_of

__all__ = ["SearchContext", "ContextData", "Budgets", "Resolved", "resolve", "prepare", "seed_everything", "seed_rngs",
           "process_threads", "regime_batch", "speed_subject_of", "LAYERS"]

LAYERS: dict[str, type] = {"conv2d": nn.Conv2d, "conv1d": nn.Conv1d, "linear": nn.Linear}


@dataclass(frozen=True)
class Budgets:
    """The search's budgets, relative to the replaced layers (``--flops-ratio``, ``--cost-ratio``): what bounds the
    space. Not a trial's figures (its ``flops_ratio``/``cost_ratio`` attributes are measurements)."""

    flops: float
    cost: float | None   # None: no cost budget

    def substitute_options(self) -> dict[str, Any]:
        """As ``substitute()`` takes them."""
        return {"flops_ratio": self.flops, "cost_ratio": self.cost}


@dataclass(frozen=True)
class Resolved:
    """The config's values that need a rule to read, each read once (:func:`resolve`)."""

    task: Task
    device: Device
    speed: SpeedTarget                        # the verdict's speed target (``--target``; auto: the device's)
    also_measure: tuple[SpeedTarget, ...]     # --also-measure's, the verdict's left out, each once
    budgets: Budgets
    speed_process: str                        # where the final stage times: "fresh" processes or the "same" one

    @property
    def speed_targets(self) -> list[SpeedTarget]:
        """Every target the final stage times: the verdict's first."""
        return [self.speed, *self.also_measure]


def resolve(config: SearchConfig) -> Resolved:
    """The task object, the device, the parsed speed targets and the budgets of a validated `config`."""
    device = resolve_device(config.accelerator, config.devices, config.precision)
    speed = device.default_speed_target() if config.speed_target == "auto" else parse_target(config.speed_target)
    also = tuple(parse_target(t) for t in dict.fromkeys(config.also_measure) if t != speed.name)
    return Resolved(task_of(config), device, speed, also, Budgets(config.flops_ratio, config.cost_ratio),
                    speed_process_of(config.speed_process))


@dataclass(frozen=True)
class ContextData:
    """What :func:`prepare` reads off the data: the example batch, the batch the final stage times models on and
    the sizes the model is built at. Plain tensors and ints: a process that only times models (the final stage's
    fresh one) is sent these and loads no data (nor Lightning)."""

    example: torch.Tensor
    timing_example: torch.Tensor
    num_classes: int
    in_channels: int


@dataclass
class SearchContext:
    """What every trial shares: the config and its resolved values, data, one example batch, the space."""

    config: SearchConfig
    resolved: Resolved
    datamodule: Any             # None in a context prepared from ContextData (it times models, trains none)
    data: ContextData           # what was read off the data: the example and timing batches, the sizes
    space_options: dict[str, Any]   # substitute()'s options beside the budgets: depth, priors, where, groups...
    space: OperatorSpace
    substitution: Substitution  # on a throw-away model: baseline FLOPs, mappings, skipped layers

    @property
    def example(self) -> torch.Tensor:
        return self.data.example

    @property
    def timing_example(self) -> torch.Tensor:
        """The inputs the final stage times whole models on (the task's timing_batch)."""
        return self.data.timing_example

    @property
    def num_classes(self) -> int:
        return self.data.num_classes

    @property
    def in_channels(self) -> int:
        return self.data.in_channels

    @property
    def task(self) -> Task:
        return self.resolved.task

    @property
    def device(self) -> Device:
        return self.resolved.device

    @property
    def budgets(self) -> Budgets:
        return self.resolved.budgets

    def build_model(self) -> nn.Module:
        """A fresh model of the config (the task builds it)."""
        return self.task.build_model(self.config, self.num_classes, self.in_channels)

    def speed_subject(self, target: SpeedTarget | None = None) -> SpeedSubject:
        """What the speed protocol times for this search: the substitution on the timing batch, at the training's
        precision, on `target` (default: the verdict's), in the speed regime (``--speed-batch``, ``--speed-size``:
        the batch resized, and the model substituted anew at its sizes; default: the training's); its recipe
        prepares this context again in a fresh process from the config and the batches read off the data (no data
        loaded, no Lightning)."""
        substitution, example, label = self._speed_regime
        return SpeedSubject(substitution, example, label, precision_name(self.config.precision),
                            target or self.resolved.speed, functools.partial(speed_subject_of, self.config, self.data),
                            self.config.compile_mode)

    @functools.cached_property
    def _speed_regime(self) -> tuple[Substitution, torch.Tensor, str]:
        """(the substitution, the timing batch, its label) of the speed regime; the search's own where the regime
        is the training's."""
        batch, size = self.config.speed_batch, self.config.speed_size
        example = regime_batch(self.timing_example, batch, size)
        label = self.task.timing_label(example) + (f" at {size}×{size}" if size and example.dim() == 4 else
                                                   f" at length {size}" if size else "")
        if example.shape == self.timing_example.shape:
            return self.substitution, self.timing_example, label
        # the same model and layers substituted at the regime's sizes: no budget (the operators come from the
        # search's space, replayed here by their structure), the space's own options
        seed_rngs(self.config.seed)
        model = self.build_model()
        assert self.config.layer is not None  # SearchConfig.__post_init__ gives it the task's default
        sub = substitute(model, LAYERS[self.config.layer], example, check=False, flops_ratio=None,
                         cost_ratio=None, **self.space_options)
        return sub, example, label

    def with_config(self, config: SearchConfig) -> SearchContext:
        """This context for a changed config (a final-stage seed, another speed target), its values resolved again."""
        return replace(self, config=config, resolved=resolve(config))


def regime_batch(example: torch.Tensor, batch: int | None, size: int | None) -> torch.Tensor:
    """The timing batch in a speed regime: its first `batch` rows (cycled where it has fewer), its spatial sides
    resized to `size` (bilinear for images, linear for sequences of channels; a token batch keeps its length).

    Example:
        >>> regime_batch(torch.zeros(64, 1, 8, 8), 1, 224).shape
        torch.Size([1, 1, 224, 224])
    """
    out = example
    if batch is not None and batch != out.shape[0]:
        out = out[torch.arange(batch) % out.shape[0]]
    if size is not None and out.is_floating_point() and out.dim() in (3, 4) and tuple(out.shape[2:]) != \
            (size,) * (out.dim() - 2):
        mode = "bilinear" if out.dim() == 4 else "linear"
        out = torch.nn.functional.interpolate(out, size=(size,) * (out.dim() - 2), mode=mode, align_corners=False)
    return out.contiguous()


def speed_subject_of(config: SearchConfig, data: ContextData, target: SpeedTarget) -> SpeedSubject:
    """A search's speed subject on `target`, prepared from its config and data: the recipe a fresh timing process
    runs (module-level, so that it pickles by name)."""
    return prepare(config, data).speed_subject(target)


def seed_everything(seed: int) -> None:
    """What Lightning's ``seed_everything(seed, workers=False)`` does (random, numpy, torch; PL_GLOBAL_SEED and
    PL_SEED_WORKERS for Lightning's trainers), written here because importing Lightning costs ~4.5 s in a process
    that trains nothing (the final stage's timing process). Lightning accepts only 0..2**32-1, so any --seed
    (negative, or seed + trial number past the top) is folded into that range first. It sets the environment: a
    trial's training calls it; a library call (`prepare`) seeds the generators alone (:func:`seed_rngs`)."""
    seed %= 1 << 32
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    seed_rngs(seed)
    os.environ["PL_SEED_WORKERS"] = "0"


def seed_rngs(seed: int) -> None:
    """random's, numpy's and torch's generators seeded as :func:`seed_everything` seeds them, the environment
    left alone."""
    seed %= 1 << 32
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def process_threads(config: SearchConfig) -> int | None:
    """The torch threads a search's process should use (the entry points set them: runtime.process): --threads,
    else 1 for the embedded tasks, whose tiny models only contend with more (50x slower with 2 threads on a busy
    2-core machine); None: torch's default."""
    return config.threads or (1 if _embedded(config) else None)


def _embedded(config: SearchConfig) -> bool:
    """The task's data ships with the package (digits, MNIST-1D, the text corpus): small, in memory."""
    return config.data_dir is None and config.dataset in ("digits", "mnist1d", "text")


def _space_options(config: SearchConfig, layer: type, in_channels: int) -> dict[str, Any]:
    options: dict[str, Any] = {"max_depth": config.max_depth, "seed": config.seed, "priors": config.priors}
    if config.cost_profile is not None:
        options["target"] = config.cost_profile
    if config.groups:
        options["groups"] = True
    if config.where is not None:
        options["where"] = config.where
    elif layer in (nn.Conv2d, nn.Conv1d):  # keep the stem (it reads the input's channels), as the original did
        options["where"] = lambda name, m: m.in_channels != in_channels
    return options


def _load_data(config: SearchConfig, resolved: Resolved) -> Any:
    from lightning_modules import build_datamodule

    embedded = _embedded(config)
    kwargs: dict[str, Any] = {"batch_size": config.batch_size, **resolved.task.datamodule_kwargs(config)}
    if resolved.device.gpu and not embedded:  # feed the GPU: page-locked batches from worker processes
        kwargs["num_workers"] = min(4, max(1, (os.cpu_count() or 2) // 2))
    assert config.dataset is not None  # SearchConfig.__post_init__ gives it the task's default
    datamodule = build_datamodule(config.dataset, config.data_dir, **kwargs)
    datamodule.pin_memory = resolved.device.cuda
    datamodule.setup("fit")
    return datamodule


def prepare(config: SearchConfig, data: ContextData | None = None) -> SearchContext:
    """Validates and resolves `config`, loads the data (unless `data` gives what is read off it: then the context
    has no datamodule) and builds the operator space from one real forward pass of the model."""
    config.validate()
    resolved = resolve(config)
    datamodule = None
    if data is None:
        datamodule = _load_data(config, resolved)
        data = _read_data(config, resolved, datamodule)
    example, num_classes, in_channels = data.example, data.num_classes, data.in_channels
    assert config.layer is not None  # SearchConfig.__post_init__ gives it the task's default
    layer = LAYERS[config.layer]
    options = _space_options(config, layer, in_channels)
    seed_rngs(config.seed)
    probe = resolved.task.build_model(config, num_classes, in_channels)
    resolved.task.check_model(config, probe)
    try:
        # check=False: run.check_space_holds_operators refuses an empty space before the study opens, in flags' words
        sub = substitute(probe, layer, example, check=False, **resolved.budgets.substitute_options(), **options)
    except SubstitutionError as e:  # say it in the search's words: its flag, not substitute()'s argument
        head = "no layer can be substituted"
        if str(e).startswith(head) and "pass groups=True" in str(e):
            raise SubstitutionError(f"{head} without --groups (grouped and depthwise convolutions too)"
                                    f"{str(e)[len(head):]}") from e
        raise
    return SearchContext(config, resolved, datamodule, data, options, sub.space, sub)


def _read_data(config: SearchConfig, resolved: Resolved, datamodule: Any) -> ContextData:
    # the example batch sizes the layers and sets every operator's initial scale (match_output_scale): seeded,
    # so that it is the same batch in every process (the shuffling loader draws from the global RNG)
    seed_rngs(config.seed)
    batch = next(iter(datamodule.train_dataloader()))
    example = batch[0] if isinstance(batch, (tuple, list)) else batch
    num_classes, in_channels = resolved.task.sizes(datamodule)
    return ContextData(example, resolved.task.timing_batch(datamodule, example), num_classes, in_channels)
