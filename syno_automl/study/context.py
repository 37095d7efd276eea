"""What every trial of a search shares (SearchContext): the data, one example batch, the model, the space.

:func:`prepare` loads the task's data (syno_automl.tasks) and builds the operator space from one real forward pass
of the model.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import nn

from syno_automl.config import SearchConfig
from syno_automl.errors import SubstitutionError
from syno_automl.placeholder import Substitution, substitute
from syno_automl.space import OperatorSpace
from syno_automl.tasks import task_of
from syno_automl.tasks.base import check_accelerator, uses_gpu

__all__ = ["SearchContext", "prepare", "seed_everything", "LAYERS"]

LAYERS: dict[str, type] = {"conv2d": nn.Conv2d, "linear": nn.Linear}


@dataclass
class SearchContext:
    """What every trial shares: data, one example batch, how to build the model, the space."""

    config: SearchConfig
    datamodule: Any
    example: torch.Tensor
    num_classes: int
    in_channels: int
    substitute_options: dict[str, Any]
    space: OperatorSpace
    substitution: Substitution  # on a throw-away model: baseline FLOPs, mappings, skipped layers

    def build_model(self) -> nn.Module:
        from lightning_modules import build_model

        return build_model(self.config.model, self.num_classes, self.in_channels)

    def build_task(self, model: nn.Module) -> Any:
        return task_of(self.config).build_module(self.config, model, self.num_classes)


def seed_everything(seed: int) -> None:
    # Lightning's seeding (random, numpy, torch, PL_GLOBAL_SEED); it accepts only 0..2**32-1, so any
    # --seed (negative, or seed + trial number past the top) is folded into that range first
    L.seed_everything(seed % (1 << 32), workers=False, verbose=False)


def prepare(config: SearchConfig) -> SearchContext:
    """Loads the data and builds the operator space from one real forward pass of the model."""
    from lightning_modules import build_datamodule

    config.validate()
    check_accelerator(config)
    embedded = config.data_dir is None and config.dataset in ("digits", "text")
    threads = config.threads or (1 if embedded else None)
    if threads:  # tiny models: more threads only contend (50x slower with 2 threads on a busy 2-core VM)
        torch.set_num_threads(threads)
    task = task_of(config)
    kwargs: dict[str, Any] = {"batch_size": config.batch_size, **task.datamodule_kwargs(config)}
    if uses_gpu(config) and not embedded:  # feed the GPU: page-locked batches from worker processes
        kwargs["num_workers"] = min(4, max(1, (os.cpu_count() or 2) // 2))
    datamodule = build_datamodule(config.dataset, config.data_dir, **kwargs)
    datamodule.pin_memory = uses_gpu(config)
    datamodule.setup("fit")
    # the example batch sizes the layers and sets every operator's initial scale (match_output_scale): seeded,
    # so that it is the same batch in every process (the shuffling loader draws from the global RNG)
    seed_everything(config.seed)
    batch = next(iter(datamodule.train_dataloader()))
    example = batch[0] if isinstance(batch, (tuple, list)) else batch
    num_classes, in_channels = task.sizes(datamodule)
    layer = LAYERS[config.layer]
    options: dict[str, Any] = {"max_depth": config.max_depth, "flops_ratio": config.flops_ratio,
                               "seed": config.seed}
    options["cost_ratio"] = config.cost_ratio   # None: no cost budget (substitute's own default is 1.0)
    options["priors"] = config.priors
    if config.cost_profile is not None:
        options["target"] = config.cost_profile
    if config.groups:
        options["groups"] = True
    if config.where is not None:
        options["where"] = config.where
    elif layer is nn.Conv2d:  # keep the stem (it reads the image channels), as the original did
        options["where"] = lambda name, m: m.in_channels != in_channels
    from lightning_modules import build_model

    seed_everything(config.seed)
    probe = build_model(config.model, num_classes, in_channels)
    task.check_model(config, probe)
    try:
        sub = substitute(probe, layer, example, **options)
    except SubstitutionError as e:  # say it in the search's words: its flag, not substitute()'s argument
        head = "no layer can be substituted"
        if str(e).startswith(head) and "pass groups=True" in str(e):
            raise SubstitutionError(f"{head} without --groups (grouped and depthwise convolutions too)"
                                    f"{str(e)[len(head):]}") from e
        raise
    return SearchContext(config, datamodule, example, num_classes, in_channels, options, sub.space, sub)
