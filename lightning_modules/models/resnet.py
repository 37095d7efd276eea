"""CIFAR-style ResNet-18/34 (He et al., 2016): BasicBlocks on a 3x3 stride-1 stem, 32x32 inputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet for 32x32 images: 3x3 stem (no max-pool), four stages of widths 64-128-256-512."""

    def __init__(self, blocks_per_stage: list[int], num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        in_planes = 64
        stages = []
        for index, (planes, count) in enumerate(zip((64, 128, 256, 512), blocks_per_stage)):
            stride = 1 if index == 0 else 2
            blocks = []
            for block_stride in [stride] + [1] * (count - 1):
                blocks.append(BasicBlock(in_planes, planes, block_stride))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(512 * BasicBlock.expansion, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def resnet18(num_classes: int = 10, in_channels: int = 3) -> ResNet:
    """ResNet-18: [2, 2, 2, 2] BasicBlocks (11,173,962 parameters for 10 classes)."""
    return ResNet([2, 2, 2, 2], num_classes, in_channels)


def resnet34(num_classes: int = 10, in_channels: int = 3) -> ResNet:
    """ResNet-34: [3, 4, 6, 3] BasicBlocks (21,282,122 parameters for 10 classes)."""
    return ResNet([3, 4, 6, 3], num_classes, in_channels)
