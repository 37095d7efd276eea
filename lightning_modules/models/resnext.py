"""CIFAR-style ResNeXt-29 (Xie et al., 2017): bottleneck blocks with grouped 3x3 convolutions.

As in the paper's CIFAR networks, the stages output 256, 512 and 1024 channels and the grouped convolution is
``cardinality x bottleneck_width`` wide in the first stage, doubling per stage (8x64d: 34.4M parameters).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ResNeXtBlock(nn.Module):
    """1x1 reduce -> grouped 3x3 (``cardinality`` groups) -> 1x1 expand, plus an identity or projection shortcut."""

    def __init__(self, in_planes: int, group_width: int, out_planes: int, cardinality: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, group_width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(group_width)
        self.conv2 = nn.Conv2d(group_width, group_width, kernel_size=3, stride=stride, padding=1,
                               groups=cardinality, bias=False)
        self.bn2 = nn.BatchNorm2d(group_width)
        self.conv3 = nn.Conv2d(group_width, out_planes, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_planes != out_planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class ResNeXt29(nn.Module):
    """ResNeXt-29: 3x3 stem of 64 channels, then three stages of 3 blocks at 32x32, 16x16 and 8x8."""

    stage_out_planes = (256, 512, 1024)

    def __init__(self, cardinality: int = 2, bottleneck_width: int = 64, num_classes: int = 10,
                 in_channels: int = 3, blocks_per_stage: tuple[int, int, int] = (3, 3, 3)) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        in_planes = 64
        stages = []
        for index, (count, out_planes) in enumerate(zip(blocks_per_stage, self.stage_out_planes)):
            group_width = cardinality * bottleneck_width * 2 ** index
            stride = 1 if index == 0 else 2
            blocks = []
            for block_stride in [stride] + [1] * (count - 1):
                blocks.append(ResNeXtBlock(in_planes, group_width, out_planes, cardinality, block_stride))
                in_planes = out_planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.linear = nn.Linear(in_planes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def resnext29_2x64d(num_classes: int = 10, in_channels: int = 3) -> ResNeXt29:
    """ResNeXt-29 with cardinality 2 and bottleneck width 64 (9,130,314 parameters for 10 classes)."""
    return ResNeXt29(2, 64, num_classes, in_channels)
