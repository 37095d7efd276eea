"""The space's budgets and options, from the ratios given to :func:`~syno_automl.placeholder.substitution.substitute`.

``flops_ratio``, ``min_flops_ratio`` and ``cost_ratio`` become absolute ``max_flops``, ``min_flops`` and ``max_cost``
relative to the replaced layers' FLOPs / cost summed (``flops_ratio`` defaults to ``GROUPED_FLOPS_RATIO`` where
grouped convs are replaced; the priors' FLOPs floor sets ``min_flops_ratio`` where none is given). The other
options: the priors', those given (they win), and a ``min_unfold_ratio`` relaxed for small feature maps
(:func:`settle_budgets`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from syno_automl import _native
from syno_automl.echo import shown
from syno_automl.errors import SubstitutionError
from syno_automl.placeholder.layers import GROUPED_FLOPS_RATIO, KINDS
from syno_automl.placeholder.sites import Choice
from syno_automl.placeholder.space_spec import Measures, SpaceSpec
from syno_automl.priors import FLOPS_FLOOR, prior_options
from syno_automl.priors import resolve as resolve_priors


@dataclass(frozen=True)
class Asked:
    """The budget arguments as given to substitute()."""

    flops_ratio: float | None
    min_flops_ratio: float | None
    cost_ratio: float | None
    priors: bool | Sequence[str]
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Settled:
    """The space's budgets (``max_flops``, ``min_flops``, ``max_cost``) and its other options."""

    budgets: dict[str, float]
    options: dict[str, Any]


def settle_budgets(choice: Choice, space_spec: SpaceSpec, measures: Measures, asked: Asked) -> Settled:
    """The space's budgets (ratios times the replaced layers' FLOPs / cost) and options (the priors', those given,
    a relaxed unfold ratio); a budget given both as a ratio and as an option is an error."""
    flops_ratio = _flops_ratio(choice, asked)
    prior_names = resolve_priors(asked.priors)
    min_flops_ratio = asked.min_flops_ratio
    if ("flops_floor" in prior_names and min_flops_ratio is None and "min_flops" not in asked.options
            and (flops_ratio is None or flops_ratio > FLOPS_FLOOR)):  # a floor above the ceiling would empty it
        min_flops_ratio = FLOPS_FLOOR
    options = {**_prior_options(choice, space_spec, prior_names), **asked.options}
    budgets = _budgets(flops_ratio, min_flops_ratio, asked.cost_ratio, measures)
    options = _relaxed_unfold(choice, options)
    for k in budgets:
        if k in options:
            raise SubstitutionError(f"give either {k} or the ratio, not both")
    return Settled(budgets, options)


def _flops_ratio(choice: Choice, asked: Asked) -> float | None:
    """`flops_ratio` as given, or GROUPED_FLOPS_RATIO where grouped convs are replaced and no FLOPs budget is."""
    if (KINDS[choice.kind].conv and asked.flops_ratio is None and "max_flops" not in asked.options
            and any(c.layer.groups > 1 for c in choice.chosen)):
        # a dense [N, C_in, ...] -> [N, C_out, ...] operator in place of a depthwise (or grouped) conv costs up to
        # C_in (g) times the layer: unless asked otherwise, operators may cost what the replaced layers cost
        return GROUPED_FLOPS_RATIO
    return asked.flops_ratio


def _prior_options(choice: Choice, space_spec: SpaceSpec, prior_names: tuple[str, ...]) -> dict[str, Any]:
    """The priors' OperatorSpace options, fitted to the replaced layers."""
    input_names = [d["factors"][0][0] if len(d["factors"]) == 1 else ""
                   for d in _native.parse_shape(space_spec.input_shape)]
    kind = KINDS[choice.kind]
    depthwise = kind.conv and any(1 < c.layer.groups == c.layer.in_channels for c in choice.chosen)
    return prior_options(prior_names,
                         channel_input=input_names.index("C_in") if "C_in" in input_names else None,
                         widest_output=max(c.out_shape[kind.channel_dim] for c in choice.chosen),
                         depthwise=depthwise)


def _budgets(flops_ratio: float | None, min_flops_ratio: float | None, cost_ratio: float | None,
             measures: Measures) -> dict[str, float]:
    """The ratios as absolute budgets, relative to the replaced layers' FLOPs / cost summed."""
    baseline = sum(measures.flops)
    budgets: dict[str, float] = {}
    if flops_ratio is not None:
        budgets["max_flops"] = float(flops_ratio) * baseline
    if min_flops_ratio is not None:
        budgets["min_flops"] = float(min_flops_ratio) * baseline
    if cost_ratio is not None:
        if not (cost_ratio > 0 and math.isfinite(cost_ratio)):
            raise SubstitutionError(f"cost_ratio must be a positive number, got {shown(cost_ratio)}")
        budgets["max_cost"] = float(cost_ratio) * sum(measures.costs)
    return budgets


def _relaxed_unfold(choice: Choice, options: dict[str, Any]) -> dict[str, Any]:
    """`options` with ``min_unfold_ratio`` lowered, if need be, for the replaced convs' own windows to fit."""
    if not KINDS[choice.kind].conv or "min_unfold_ratio" in options:
        return options
    # the core's default (an unfold's main dim at least `ratio` times its window, in every mapping) may shut the
    # conv-equivalent operator out of the space when a layer is small (ResNet-18's 4x4 stage on CIFAR): relax
    # it just enough for the replaced layers' own k x k windows to fit (never raise it)
    default = _native.default_options()["min_unfold_ratio"]
    fit = min(min(c.in_shape[2:]) / c.layer.kernel_size[0] for c in choice.chosen)
    return {**options, "min_unfold_ratio": fit} if fit < default else options
