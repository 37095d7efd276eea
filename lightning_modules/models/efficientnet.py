"""EfficientNet-V2-S (Tan & Le, 2021): Fused-MBConv and MBConv-with-SE stages of the paper's Table 4.

The stem has stride 1 (CIFAR-style) so a 32x32 input ends at 2x2 after the four stride-2 stages.
Stochastic depth and classifier dropout (0.2 in the paper) default to 0 for deterministic short runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

BN_EPS = 1e-3


@dataclass(frozen=True)
class StageConfig:
    """One row of the paper's table: block kind, expansion, stride, output channels, number of layers."""

    fused: bool
    expand_ratio: int
    stride: int
    out_channels: int
    num_layers: int


EFFICIENTNET_V2_S_STAGES: tuple[StageConfig, ...] = (
    StageConfig(True, 1, 1, 24, 2),
    StageConfig(True, 4, 2, 48, 4),
    StageConfig(True, 4, 2, 64, 4),
    StageConfig(False, 4, 2, 128, 6),
    StageConfig(False, 6, 1, 160, 9),
    StageConfig(False, 6, 2, 256, 15),
)


def conv_bn_act(in_ch: int, out_ch: int, kernel_size: int, stride: int = 1, groups: int = 1,
                act: bool = True) -> nn.Sequential:
    """Convolution (same padding) -> BatchNorm -> optional SiLU."""
    layers: list[nn.Module] = [
        nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, padding=kernel_size // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch, eps=BN_EPS),
    ]
    if act:
        layers.append(nn.SiLU(inplace=True))
    return nn.Sequential(*layers)


class StochasticDepth(nn.Module):
    """Drops the whole residual branch per sample with probability ``p`` during training."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype, device=x.device).bernoulli_(keep)
        return x * mask / keep


class SqueezeExcitation(nn.Module):
    """Channel attention: global pool -> 1x1 reduce (SiLU) -> 1x1 expand (sigmoid) -> scale."""

    def __init__(self, channels: int, squeeze_channels: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze_channels, kernel_size=1)
        self.fc2 = nn.Conv2d(squeeze_channels, channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = x.mean(dim=(2, 3), keepdim=True)
        scale = torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(scale))))
        return x * scale


class FusedMBConv(nn.Module):
    """Fused-MBConv: 3x3 expand conv (or a single 3x3 conv when expand=1) -> 1x1 projection."""

    def __init__(self, in_ch: int, out_ch: int, expand_ratio: int, stride: int, drop_prob: float) -> None:
        super().__init__()
        self.use_residual = stride == 1 and in_ch == out_ch
        if expand_ratio == 1:
            self.block = conv_bn_act(in_ch, out_ch, 3, stride)
        else:
            hidden = in_ch * expand_ratio
            self.block = nn.Sequential(conv_bn_act(in_ch, hidden, 3, stride),
                                       conv_bn_act(hidden, out_ch, 1, act=False))
        self.drop = StochasticDepth(drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + self.drop(out) if self.use_residual else out


class MBConv(nn.Module):
    """MBConv: 1x1 expand -> depthwise 3x3 -> squeeze-excitation (ratio 0.25 of input) -> 1x1 projection."""

    def __init__(self, in_ch: int, out_ch: int, expand_ratio: int, stride: int, drop_prob: float) -> None:
        super().__init__()
        self.use_residual = stride == 1 and in_ch == out_ch
        hidden = in_ch * expand_ratio
        self.block = nn.Sequential(
            conv_bn_act(in_ch, hidden, 1),
            conv_bn_act(hidden, hidden, 3, stride, groups=hidden),
            SqueezeExcitation(hidden, max(1, in_ch // 4)),
            conv_bn_act(hidden, out_ch, 1, act=False),
        )
        self.drop = StochasticDepth(drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + self.drop(out) if self.use_residual else out


class EfficientNetV2(nn.Module):
    """EfficientNet-V2 from a stage table; 3x3 stem of 24 channels, 1x1 head of ``head_channels``."""

    def __init__(self, stages: tuple[StageConfig, ...] = EFFICIENTNET_V2_S_STAGES, num_classes: int = 10,
                 in_channels: int = 3, stem_stride: int = 1, head_channels: int = 1280,
                 stochastic_depth_prob: float = 0.0, dropout: float = 0.0) -> None:
        super().__init__()
        stem_channels = stages[0].out_channels
        self.stem = conv_bn_act(in_channels, stem_channels, 3, stem_stride)
        total_blocks = sum(stage.num_layers for stage in stages)
        blocks: list[nn.Module] = []
        in_ch = stem_channels
        for stage in stages:
            block_type = FusedMBConv if stage.fused else MBConv
            for index in range(stage.num_layers):
                drop = stochastic_depth_prob * len(blocks) / total_blocks
                stride = stage.stride if index == 0 else 1
                blocks.append(block_type(in_ch, stage.out_channels, stage.expand_ratio, stride, drop))
                in_ch = stage.out_channels
        self.blocks = nn.Sequential(*blocks)
        self.head = conv_bn_act(in_ch, head_channels, 1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(head_channels, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.head(self.blocks(self.stem(x)))
        return self.classifier(out.mean(dim=(2, 3)))


def efficientnet_v2_s(num_classes: int = 10, in_channels: int = 3, **kw: Any) -> EfficientNetV2:
    """EfficientNet-V2-S with a stride-1 stem (about 20.2M parameters for 10 classes)."""
    return EfficientNetV2(EFFICIENTNET_V2_S_STAGES, num_classes, in_channels, **kw)
