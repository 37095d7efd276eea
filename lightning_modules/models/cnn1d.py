"""Small 1-D CNNs for sequences (MNIST-1D's length 40): the embedded backbones of ``--dataset mnist1d``."""
from __future__ import annotations

import torch
from torch import nn

from .small_cnn import check_stem_kernel


def conv1d_bn_relu(in_ch: int, out_ch: int, kernel_size: int) -> nn.Sequential:
    """Stride-1 same-padding 1-D convolution (odd `kernel_size` taps) -> BatchNorm -> ReLU."""
    return nn.Sequential(
        nn.Conv1d(in_ch, out_ch, kernel_size=kernel_size, stride=1, padding=kernel_size // 2, bias=False),
        nn.BatchNorm1d(out_ch),
        nn.ReLU(inplace=True),
    )


class SmallCNN1d(nn.Module):
    """stem conv (`stem_kernel` taps) -> three 3-tap convs -> global average pool -> linear, `width` channels each.

    The search replaces the three 3-tap convs. ``stem_kernel=5`` (``small_cnn1d``) gives the stem spatial reach of
    its own; ``stem_kernel=1`` (``pointwise_cnn1d``, the default) leaves all of it to the replaced convs, so that an
    operator without spatial reach shows in the accuracy (docs/search.md, 'The embedded models').

    Example:
        >>> SmallCNN1d(num_classes=10, in_channels=1)(torch.zeros(2, 1, 40)).shape
        torch.Size([2, 10])
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width: int = 64, stem_kernel: int = 5) -> None:
        super().__init__()
        check_stem_kernel(stem_kernel)
        self.features = nn.Sequential(
            conv1d_bn_relu(in_channels, width, stem_kernel),
            conv1d_bn_relu(width, width, 3),
            conv1d_bn_relu(width, width, 3),
            conv1d_bn_relu(width, width, 3),
        )
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=2))


def small_cnn1d(num_classes: int = 10, in_channels: int = 1, **kw: int) -> SmallCNN1d:
    """SmallCNN1d with a 5-tap stem."""
    return SmallCNN1d(num_classes=num_classes, in_channels=in_channels, **{"stem_kernel": 5, **kw})


def pointwise_cnn1d(num_classes: int = 10, in_channels: int = 1, **kw: int) -> SmallCNN1d:
    """SmallCNN1d with a pointwise (1-tap) stem: the spatial reach is all in the substituted convs."""
    return SmallCNN1d(num_classes=num_classes, in_channels=in_channels, **{"stem_kernel": 1, **kw})
