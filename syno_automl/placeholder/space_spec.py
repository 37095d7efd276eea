"""The space that :func:`~syno_automl.placeholder.substitution.substitute` builds over the chosen layers.

Its spec (the shapes and variable specs given, else the kind's defaults of ``layers.DEFAULTS`` with the layers'
most common ``k`` and ``g``: :func:`space_spec_for`), and per layer its mapping, FLOPs and cost (:func:`measure`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from syno_automl import _native
from syno_automl.cost_profile import CostProfile
from syno_automl.placeholder.layers import DEFAULTS, KINDS, layer_cost, layer_flops
from syno_automl.placeholder.sites import Choice, Chosen


@dataclass(frozen=True)
class SpaceSpec:
    """The space's spec: its shapes, its variable specs, the variables they name and the common ``g``."""

    input_shape: str
    output_shape: str
    primary: tuple[str, ...]
    coefficients: tuple[str, ...]
    names: frozenset[str]
    common_g: int


@dataclass(frozen=True)
class Measures:
    """Per chosen layer: its mapping, FLOPs and cost (in the units of ``Operator.cost``)."""

    mappings: tuple[dict[str, int], ...]
    flops: tuple[int, ...]
    costs: tuple[float, ...]


def space_spec_for(choice: Choice, spec: tuple[str, str] | None, primary: Sequence[str] | None,
                   coefficients: Sequence[str] | None, groups: bool) -> SpaceSpec:
    """The space's shapes and variable specs: those given, else the kind's defaults (``k``, ``g`` filled in)."""
    d_in, d_out, d_primary, _ = DEFAULTS[choice.kind]
    input_shape, output_shape = spec if spec is not None else (d_in, d_out)
    d_coefficients, common_g = _default_coefficients(choice, groups)
    primary = list(d_primary if primary is None else primary)
    coefficients = list(d_coefficients if coefficients is None else coefficients)
    names = _spec_names(primary) | _spec_names(coefficients)
    return SpaceSpec(input_shape, output_shape, tuple(primary), tuple(coefficients), frozenset(names), common_g)


def _spec_names(specs: Iterable[str]) -> set[str]:
    return {_native.parse_spec(s)["name"] for s in specs}


def _default_coefficients(choice: Choice, groups: bool) -> tuple[list[str], int]:
    """The kind's default coefficients with the layers' most common ``k`` (and ``g``), and that ``g`` (else 1)."""
    d_coefficients = DEFAULTS[choice.kind][3]
    if not KINDS[choice.kind].conv:
        return d_coefficients, 1
    common_k = Counter(c.layer.kernel_size[0] for c in choice.chosen).most_common(1)[0][0]
    d_coefficients = [c.format(k=common_k) for c in d_coefficients]
    gs = [c.layer.groups for c in choice.chosen if 1 < c.layer.groups < c.layer.in_channels] if groups else []
    if not gs:
        return d_coefficients, 1
    # g occurs twice in a grouped conv (REDUCE g^-1*C_in, MERGE [g, g^-1*C_out]): with ': 1' the layers' own
    # operator would be out of the space
    common_g = Counter(gs).most_common(1)[0][0]
    return d_coefficients + [f"g={common_g}: 2"], common_g


def _mapping_of(kind: str, chosen: Chosen, space_spec: SpaceSpec) -> dict[str, int]:
    """The layer's values of the variables the space names."""
    layer, in_shape, out_shape = chosen.layer, chosen.in_shape, chosen.out_shape
    spatial = KINDS[kind].spatial
    if spatial:
        # g: the layer's groups where it is grouped, else the common one (a coefficient must fit every mapping;
        # g=1 or g=C_in would shut every g-dependent operator out of a space mixing layers)
        g = layer.groups if 1 < layer.groups < layer.in_channels else space_spec.common_g
        full = {"N": in_shape[0], "C_in": in_shape[1], "C_out": out_shape[1], **dict(zip(spatial, in_shape[2:])),
                "k": layer.kernel_size[0], "g": g}
    else:
        full = {"N": math.prod(in_shape[:-1]), "C_in": in_shape[-1], "C_out": out_shape[-1]}
    return {k: v for k, v in full.items() if k in space_spec.names}


def measure(choice: Choice, space_spec: SpaceSpec, profile: CostProfile | None) -> Measures:
    """Each chosen layer's mapping, FLOPs and cost (priced by `profile`)."""
    mappings, flops, costs = [], [], []
    for c in choice.chosen:
        mappings.append(_mapping_of(choice.kind, c, space_spec))
        flops.append(layer_flops(c.layer, c.in_shape, c.out_shape))
        costs.append(layer_cost(flops[-1], c.out_shape, c.layer.weight.numel(), input_shape=c.in_shape,
                                profile=profile))
    return Measures(tuple(mappings), tuple(flops), tuple(costs))
