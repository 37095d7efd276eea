"""Models and substitution for bench/gpu_window.py, torch only (the GPU machine has no native build).

``resnet(depth, stem, width)``: ResNet-18/34 of BasicBlocks with the ImageNet stem (7x7/2 conv and a 3x3/2 max-pool,
224² inputs) or the CIFAR stem (3x3/1, 32² inputs, as ``lightning_modules.models.resnet``). ``substituted`` puts an
exported operator (``bench/gpu_window_ops``: one file per conv size, made by ``--prepare``) in place of every
stride-1 3x3 conv whose size it was exported for, as ``syno_automl.substitute`` would (a per-channel bias where the
conv had one). ``cost`` counts a model's FLOPs and the bytes it must at least move (roofline floor).
"""
from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, blocks: list[int], stem: str, width: int = 64, classes: int = 1000) -> None:
        super().__init__()
        if stem == "imagenet":
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers, cin = [], width
        for i, count in enumerate(blocks):
            cout = width * 2 ** i
            for j in range(count):
                layers.append(BasicBlock(cin, cout, 2 if i > 0 and j == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))


def resnet(depth: int, stem: str, width: int = 64) -> ResNet:
    blocks = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3]}[depth]
    return ResNet(blocks, stem, width, 1000 if stem == "imagenet" else 10)


class OpLayer(nn.Module):
    """An exported operator in place of a conv, with the conv's bias if it had one. A 5-D weight goes through
    ``Module.to`` as a 6-D view (as ``syno_automl``'s Placeholder does), so ``to(memory_format=channels_last)``
    works."""

    def __init__(self, operator: nn.Module, out_channels: int, bias: bool, flops_per_sample: float) -> None:
        super().__init__()
        self.operator = operator
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.flops_per_sample = flops_per_sample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.operator(x)
        return y if self.bias is None else y + self.bias.reshape(-1, 1, 1)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> OpLayer:
        def apply(t: torch.Tensor) -> torch.Tensor:
            return fn(t.unsqueeze(0)).squeeze(0) if t.dim() == 5 else fn(t)
        return super()._apply(apply, recurse)


def load_class(path: Path, name: str) -> type:
    """The class ``name`` of the standalone file ``path`` (imported once under a name of its own)."""
    module_name = f"_gpu_window_op_{path.stem}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # torch.compile and dataclasses look the module up by name
        spec.loader.exec_module(module)
    return getattr(module, name)


def manifest(ops_dir: Path) -> dict[str, Any]:
    return json.loads((ops_dir / "manifest.json").read_text())


def operator_module(ops_dir: Path, entry: dict[str, Any], key: str, backend: str) -> nn.Module | None:
    """The exported module of operator ``entry`` at size ``key`` (``"64x56"``), or None when not exported."""
    size = entry["sizes"].get(key)
    if size is None:
        return None
    if backend == "triton":
        if not size["triton_file"]:
            return None
        return load_class(ops_dir / size["triton_file"], size["triton_class"])()
    return load_class(ops_dir / size["file"], size["class"])()


def _conv_inputs(model: nn.Module, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: shapes.__setitem__(n, tuple(i[0].shape)))
             for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return shapes


def replaceable(conv: nn.Conv2d) -> bool:
    """Stride-1 3x3 'same' convs that keep the channels, as the exported sizes (C_in = C_out) are."""
    return (conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1) and conv.groups == 1
            and conv.dilation == (1, 1) and conv.in_channels == conv.out_channels)


def substituted(model: nn.Module, x: torch.Tensor, ops_dir: Path, entry: dict[str, Any],
                backend: str = "torch") -> tuple[nn.Module, dict[str, int]]:
    """``model`` with operator ``entry`` in place of each replaceable conv whose size it was exported for (on
    ``backend``: ``torch`` lowering or ``triton`` kernel); returns (model, {"replaced", "kept"})."""
    shapes = _conv_inputs(model, x)
    replaced = kept = 0
    for name, conv in list(model.named_modules()):
        if not isinstance(conv, nn.Conv2d) or not replaceable(conv):
            continue
        key = f"{conv.in_channels}x{shapes[name][-1]}"
        op = operator_module(ops_dir, entry, key, backend)
        if op is None:
            kept += 1
            continue
        parent, _, attr = name.rpartition(".")
        layer = OpLayer(op, conv.out_channels, conv.bias is not None, entry["sizes"][key]["flops_per_sample"])
        setattr(model.get_submodule(parent) if parent else model, attr, layer)
        replaced += 1
    return model, {"replaced": replaced, "kept": kept}


def cost(model: nn.Module, x: torch.Tensor) -> tuple[float, float]:
    """(FLOPs of one forward on ``x``, the bytes it must at least move: weights, input and output once)."""
    flops = [0.0]

    def conv(m: nn.Conv2d, i: Any, o: torch.Tensor) -> None:
        flops[0] += 2.0 * o.numel() * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]

    def linear(m: nn.Linear, i: Any, o: torch.Tensor) -> None:
        flops[0] += 2.0 * o.numel() * m.in_features

    def op(m: OpLayer, i: Any, o: torch.Tensor) -> None:
        flops[0] += m.flops_per_sample * i[0].shape[0]

    table: dict[type, Callable[..., None]] = {nn.Conv2d: conv, nn.Linear: linear, OpLayer: op}
    hooks = [m.register_forward_hook(table[type(m)]) for m in model.modules() if type(m) in table]
    with torch.no_grad():
        out = model(x)
    for h in hooks:
        h.remove()
    size = x.element_size()
    nbytes = sum(p.numel() for p in model.parameters()) * size + x.numel() * size + out.numel() * size
    return flops[0], float(nbytes)
