"""The layers :func:`~syno_automl.placeholder.substitute` replaces (Conv2d, Linear): their default spec, their
FLOPs and cost, and the reasons a layer of a supported type is left alone.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from syno_automl import _native
from syno_automl.echo import shown
from syno_automl.errors import SubstitutionError

if TYPE_CHECKING:
    from syno_automl.cost_profile import CostProfile

__all__ = ["DEFAULTS", "GROUPED_FLOPS_RATIO", "layer_flops", "layer_cost", "supported_types", "conv_reason"]

#: default spec per layer kind: (input shape, output shape, primary, coefficients); "{k}" is the kernel size
DEFAULTS: dict[str, tuple[str, str, list[str], list[str]]] = {
    "conv2d": ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
               ["k={k}: 2", "s=2: 2"]),
    "linear": ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["k=3: 2", "s=2: 2"]),
}

_SUPPORTED: dict[type, str] = {nn.Conv2d: "conv2d", nn.Linear: "linear"}
#: flops_ratio used when grouped/depthwise convs are substituted and no FLOPs budget is given
GROUPED_FLOPS_RATIO = 1.0


def layer_flops(layer: nn.Module, input_shape: Sequence[int], output_shape: Sequence[int]) -> int:
    """FLOPs of a Conv2d / Linear layer (2 x multiply-accumulates, bias not counted)."""
    if isinstance(layer, nn.Conv2d):
        kh, kw = layer.kernel_size
        return 2 * math.prod(output_shape) * (layer.in_channels // layer.groups) * kh * kw
    if isinstance(layer, nn.Linear):
        return 2 * math.prod(output_shape) * layer.in_features
    raise SubstitutionError(f"no FLOPs formula for {type(layer).__name__}")


def layer_cost(flops: float, output_shape: Sequence[int], weight_elements: int, *,
               input_shape: Sequence[int] | None = None, profile: CostProfile | None = None) -> float:
    """A Conv2d / Linear layer's cost in the units of ``Operator.cost``: what the conv-equivalent operator's
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
    for t in types:
        if not isinstance(t, type) or not issubclass(t, nn.Module):
            raise SubstitutionError(f"{shown(t)} is not an nn.Module class")
        if t not in _SUPPORTED:
            raise SubstitutionError(f"unsupported layer type {t.__module__}.{t.__qualname__}: substitute() "
                                    f"supports {', '.join('nn.' + s.__name__ for s in _SUPPORTED)}")
    return types


def conv_reason(layer: nn.Conv2d, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                kernel_sizes: Sequence[int] | None, groups: bool) -> str | None:
    """Why a Conv2d cannot be replaced by a same-size operator (None: it can)."""
    if len(in_shape) != 4:
        return f"unbatched input {list(in_shape)} (expects [N, C, H, W])"
    if layer.padding_mode != "zeros":
        return f"padding_mode={layer.padding_mode!r} (only zero padding)"
    if tuple(layer.stride) != (1, 1):
        return f"stride {tuple(layer.stride)} != 1"
    if tuple(layer.dilation) != (1, 1):
        return f"dilation {tuple(layer.dilation)} != 1"
    kh, kw = layer.kernel_size
    if kh != kw or kh % 2 == 0:
        return f"kernel {kh}x{kw} (only square odd kernels)"
    pad = layer.padding
    if isinstance(pad, str):
        same = pad == "same" or (pad == "valid" and kh == 1)
    else:
        same = tuple(pad) == (kh // 2, kh // 2)
    if not same:
        return f"padding {pad} is not same padding ({kh // 2})"
    if tuple(in_shape[2:]) != tuple(out_shape[2:]):
        return f"output size {list(out_shape[2:])} differs from input size {list(in_shape[2:])}"
    if kernel_sizes is not None and kh not in kernel_sizes:
        return f"kernel {kh}x{kw} not in kernel_sizes={tuple(kernel_sizes)}"
    if layer.groups != 1 and not groups:
        kind = "depthwise" if layer.groups == layer.in_channels else "grouped"
        return f"groups={layer.groups} ({kind}; pass groups=True to substitute grouped convolutions)"
    return None
