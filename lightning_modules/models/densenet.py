"""CIFAR-style DenseNet-121 (Huang et al., 2017): growth rate 32, 3x3 stem, blocks of 6-12-24-16 layers."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class DenseLayer(nn.Module):
    """BN-ReLU-1x1 (4k channels) then BN-ReLU-3x3 (k channels); the output is concatenated to the input."""

    def __init__(self, in_planes: int, growth_rate: int) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, 4 * growth_rate, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4 * growth_rate)
        self.conv2 = nn.Conv2d(4 * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([out, x], dim=1)


class Transition(nn.Module):
    """BN-ReLU-1x1 compression followed by 2x2 average pooling."""

    def __init__(self, in_planes: int, out_planes: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(in_planes)
        self.conv = nn.Conv2d(in_planes, out_planes, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class DenseNet(nn.Module):
    """DenseNet-BC for 32x32 images, with compression ``reduction`` between dense blocks."""

    def __init__(self, layers_per_block: tuple[int, ...], growth_rate: int = 32, reduction: float = 0.5,
                 num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        planes = 2 * growth_rate
        self.conv1 = nn.Conv2d(in_channels, planes, kernel_size=3, stride=1, padding=1, bias=False)
        stages: list[nn.Module] = []
        for index, count in enumerate(layers_per_block):
            layers = []
            for _ in range(count):
                layers.append(DenseLayer(planes, growth_rate))
                planes += growth_rate
            stages.append(nn.Sequential(*layers))
            if index < len(layers_per_block) - 1:
                out_planes = int(math.floor(planes * reduction))
                stages.append(Transition(planes, out_planes))
                planes = out_planes
        self.features = nn.Sequential(*stages)
        self.bn = nn.BatchNorm2d(planes)
        self.linear = nn.Linear(planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.features(self.conv1(x))
        out = F.adaptive_avg_pool2d(F.relu(self.bn(out)), 1).flatten(1)
        return self.linear(out)


def densenet121(num_classes: int = 10, in_channels: int = 3, growth_rate: int = 32) -> DenseNet:
    """DenseNet-121: dense blocks of 6, 12, 24 and 16 layers (about 6.96M parameters for 10 classes)."""
    return DenseNet((6, 12, 24, 16), growth_rate, 0.5, num_classes, in_channels)
