"""Model zoo: CIFAR-style image networks, small 1-D CNNs for sequences and a GPT-2-style decoder, written with torch
alone.

Example:
    >>> model = build_model("resnet18", num_classes=10, in_channels=3)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from syno_automl.errors import OptionError

from .cnn1d import SmallCNN1d, pointwise_cnn1d, small_cnn1d
from .densenet import densenet121
from .efficientnet import efficientnet_v2_s
from .gpt import GPT, GPTConfig, gpt, gpt2
from .resnet import resnet18, resnet34
from .resnext import resnext29_2x64d
from .small_cnn import SmallCNN, pointwise_cnn


def _image(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    return lambda num_classes, in_channels, **kw: factory(num_classes=num_classes, in_channels=in_channels, **kw)


def _language(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    # For language models ``num_classes`` is the vocabulary size and ``in_channels`` is unused.
    return lambda num_classes, in_channels, **kw: factory(vocab_size=num_classes, **kw)


_REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "pointwise_cnn": _image(pointwise_cnn),
    "small_cnn": _image(SmallCNN),
    "pointwise_cnn1d": _image(pointwise_cnn1d),
    "small_cnn1d": _image(small_cnn1d),
    "resnet18": _image(resnet18),
    "resnet34": _image(resnet34),
    "resnext29_2x64d": _image(resnext29_2x64d),
    "densenet121": _image(densenet121),
    "efficientnet_v2_s": _image(efficientnet_v2_s),
    "gpt": _language(gpt),
    "gpt2": _language(gpt2),
}

MODEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)
LANGUAGE_MODEL_NAMES: tuple[str, ...] = ("gpt", "gpt2")


def build_model(name: str, num_classes: int = 10, in_channels: int = 3, **kw: Any) -> nn.Module:
    """Build a model by name; for ``gpt``/``gpt2`` ``num_classes`` is the vocabulary size."""
    key = name.lower().replace("-", "_")
    if key not in _REGISTRY:
        raise OptionError(f"unknown model {name!r}; known models: {', '.join(MODEL_NAMES)}")
    return _REGISTRY[key](num_classes, in_channels, **kw)


__all__ = ["GPT", "GPTConfig", "LANGUAGE_MODEL_NAMES", "MODEL_NAMES", "SmallCNN", "SmallCNN1d", "build_model",
           "densenet121", "efficientnet_v2_s", "gpt", "gpt2", "pointwise_cnn", "pointwise_cnn1d", "resnet18",
           "resnet34", "resnext29_2x64d", "small_cnn1d"]
