"""The layers :func:`~syno_automl.placeholder.substitute` replaces (Conv1d, Conv2d, Linear): one :class:`LayerKind`
each (its default spec, its spatial coordinates), their FLOPs and cost, and the reasons a layer of a supported type
is left alone.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch import nn

from syno_automl import _native
from syno_automl.echo import shown
from syno_automl.errors import SubstitutionError

if TYPE_CHECKING:
    from syno_automl.cost_profile import CostProfile

__all__ = ["LayerKind", "KINDS", "DEFAULTS", "GROUPED_FLOPS_RATIO", "kind_of", "layer_flops", "layer_cost",
           "supported_types", "conv_reason"]


@dataclass(frozen=True)
class LayerKind:
    """One kind of layer substitute() replaces: its class, its default spec (``{k}`` is the kernel size) and the
    names of its spatial coordinates (none for Linear, whose channels are the last dim)."""

    name: str
    layer_type: type
    input_shape: str
    output_shape: str
    primary: tuple[str, ...]
    coefficients: tuple[str, ...]
    spatial: tuple[str, ...] = ()

    @property
    def conv(self) -> bool:
        """A convolution: channels on dim 1, then the spatial coordinates (else channels last, as Linear)."""
        return bool(self.spatial)

    @property
    def channel_dim(self) -> int:
        return 1 if self.conv else -1

    def sizes_text(self, shape: Sequence[int]) -> str:
        """The spatial sizes of a layer's input as its messages say them: ``16x16``, ``length 40``."""
        sizes = [str(s) for s in shape[2:]]
        return f"length {sizes[0]}" if len(sizes) == 1 else "x".join(sizes)


#: the kinds, by name (the CLI's --layer names them)
KINDS: dict[str, LayerKind] = {k.name: k for k in (
    LayerKind("conv1d", nn.Conv1d, "[N, C_in, L]", "[N, C_out, L]", ("N: 0", "C_in: 2", "C_out: 2", "L: 2"),
              ("k={k}: 2", "s=2: 2"), ("L",)),
    LayerKind("conv2d", nn.Conv2d, "[N, C_in, H, W]", "[N, C_out, H, W]",
              ("N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"), ("k={k}: 2", "s=2: 2"), ("H", "W")),
    LayerKind("linear", nn.Linear, "[N, C_in]", "[N, C_out]", ("N: 0", "C_in: 2", "C_out: 2"), ("k=3: 2", "s=2: 2")),
)}

#: default spec per layer kind: (input shape, output shape, primary, coefficients); "{k}" is the kernel size
DEFAULTS: dict[str, tuple[str, str, list[str], list[str]]] = {
    name: (k.input_shape, k.output_shape, list(k.primary), list(k.coefficients)) for name, k in KINDS.items()}

#: flops_ratio used when grouped/depthwise convs are substituted and no FLOPs budget is given
GROUPED_FLOPS_RATIO = 1.0


def kind_of(layer: nn.Module) -> LayerKind:
    """The kind of a layer of a supported type."""
    for kind in KINDS.values():
        if isinstance(layer, kind.layer_type):
            return kind
    raise SubstitutionError(f"unsupported layer type {type(layer).__name__}")


def layer_flops(layer: nn.Module, input_shape: Sequence[int], output_shape: Sequence[int]) -> int:
    """FLOPs of a Conv1d / Conv2d / Linear layer (2 x multiply-accumulates, bias not counted)."""
    if isinstance(layer, (nn.Conv1d, nn.Conv2d)):
        return 2 * math.prod(output_shape) * (layer.in_channels // layer.groups) * math.prod(layer.kernel_size)
    if isinstance(layer, nn.Linear):
        return 2 * math.prod(output_shape) * layer.in_features
    raise SubstitutionError(f"no FLOPs formula for {type(layer).__name__}")


def layer_cost(flops: float, output_shape: Sequence[int], weight_elements: int, *,
               input_shape: Sequence[int] | None = None, profile: CostProfile | None = None) -> float:
    """A Conv1d / Conv2d / Linear layer's cost in the units of ``Operator.cost``: what the conv-equivalent operator's
    plan costs (one convolution or matmul: its FLOPs, its output and its weight's gradient written; under a
    profile also its input and weight read, and its kernels: see CostProfile.layer_cost)."""
    if profile is None:  # today's cost (the cpu.eager profile), exactly as before
        return float(flops) + _native.ELEMENT_COST * (math.prod(output_shape) + weight_elements)
    if input_shape is None:
        raise SubstitutionError("layer_cost under a cost profile needs the layer's input_shape (what it reads)")
    return profile.layer_cost(float(flops), math.prod(input_shape), math.prod(output_shape), weight_elements)


def supported_types(layer_types: Any) -> tuple[type, ...]:
    """``layer_types`` (a class or a tuple of classes) as a tuple, checked against the layers substitute() knows."""
    if isinstance(layer_types, type):
        layer_types = (layer_types,)
    try:
        types = tuple(layer_types)
    except TypeError:
        raise SubstitutionError(f"layer_types must be a layer class or a tuple of them, got {shown(layer_types)}") \
            from None
    if not types:
        raise SubstitutionError("no layer type given")
    supported = tuple(k.layer_type for k in KINDS.values())
    for t in types:
        if not isinstance(t, type) or not issubclass(t, nn.Module):
            raise SubstitutionError(f"{shown(t)} is not an nn.Module class")
        if t not in supported:
            raise SubstitutionError(f"unsupported layer type {t.__module__}.{t.__qualname__}: substitute() "
                                    f"supports {', '.join('nn.' + s.__name__ for s in supported)}")
    return types


def conv_reason(layer: nn.Conv1d | nn.Conv2d, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                kernel_sizes: Sequence[int] | None, groups: bool) -> str | None:
    """Why a Conv1d / Conv2d cannot be replaced by a same-size operator (None: it can)."""
    kind = kind_of(layer)
    n = len(kind.spatial)
    if len(in_shape) != 2 + n:
        return f"unbatched input {list(in_shape)} (expects [N, C, {', '.join(kind.spatial)}])"
    if layer.padding_mode != "zeros":
        return f"padding_mode={layer.padding_mode!r} (only zero padding)"
    if tuple(layer.stride) != (1,) * n:
        return f"stride {_shown(layer.stride)} != 1"
    if tuple(layer.dilation) != (1,) * n:
        return f"dilation {_shown(layer.dilation)} != 1"
    ks = tuple(layer.kernel_size)
    k = ks[0]
    kernel = "x".join(map(str, ks))
    if len(set(ks)) != 1 or k % 2 == 0:
        return f"kernel {kernel} (only {'square ' if n > 1 else ''}odd kernels)"
    pad = layer.padding
    if isinstance(pad, str):
        same = pad == "same" or (pad == "valid" and k == 1)
    else:
        same = tuple(pad) == (k // 2,) * n
    if not same:
        return f"padding {_shown(pad)} is not same padding ({k // 2})"
    if tuple(in_shape[2:]) != tuple(out_shape[2:]):
        return f"output size {list(out_shape[2:])} differs from input size {list(in_shape[2:])}"
    if kernel_sizes is not None and k not in kernel_sizes:
        return f"kernel {kernel} not in kernel_sizes={tuple(kernel_sizes)}"
    if layer.groups != 1 and not groups:
        form = "depthwise" if layer.groups == layer.in_channels else "grouped"
        return f"groups={layer.groups} ({form}; pass groups=True to substitute grouped convolutions)"
    return None


def _shown(value: Any) -> str:
    """A Conv's stride / dilation / padding as its messages say it: ``2`` for Conv1d's ``(2,)``, else the tuple."""
    if isinstance(value, tuple) and len(value) == 1:
        return str(value[0])
    return str(tuple(value) if isinstance(value, (tuple, list)) else value)
