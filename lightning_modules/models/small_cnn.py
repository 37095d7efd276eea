"""A small, fast CNN for 8x8..32x32 inputs: the embedded backbones of the digits dataset (``pointwise_cnn``, the
default, and ``small_cnn``)."""
from __future__ import annotations

import torch
from torch import nn

from syno_automl.errors import OptionError


def check_stem_kernel(stem_kernel: int) -> None:
    """A stem's kernel must be odd (same padding keeps the size)."""
    if stem_kernel < 1 or stem_kernel % 2 == 0:
        raise OptionError(f"stem_kernel must be a positive odd number (same padding), got {stem_kernel}")


def conv_bn_relu(in_ch: int, out_ch: int, kernel_size: int = 3) -> nn.Sequential:
    """Stride-1 same-padding square convolution (odd `kernel_size`) -> BatchNorm -> ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel_size=kernel_size, stride=1, padding=kernel_size // 2, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """stem conv(w) -> conv(w) -> 2x2 max-pool -> conv(2w) -> global average pool -> linear; the stem is 3x3
    (``small_cnn``) or `stem_kernel` square, the others 3x3.

    Width 64 by default: the search replaces the two convs after the stem, and at width 32 they are too small a
    share of the model's time for a cheaper operator to show (a grouped conv with 2 groups, within 1 pp of the
    baseline on digits, makes the whole model only 1.22x faster in eager inference; at width 64, 1.43x).

    ``stem_kernel=1`` (``pointwise_cnn``, the digits default) leaves all the spatial reach to the two replaced
    convs: with a 3x3 stem even an operator with none is within 0.6 pp of the baseline on digits, so the search
    could not tell operators apart by accuracy (docs/search.md, 'The embedded models').

    Example:
        >>> SmallCNN(num_classes=10, in_channels=1)(torch.zeros(2, 1, 16, 16)).shape
        torch.Size([2, 10])
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width: int = 64, stem_kernel: int = 3) -> None:
        super().__init__()
        check_stem_kernel(stem_kernel)
        self.features = nn.Sequential(
            conv_bn_relu(in_channels, width, stem_kernel),
            conv_bn_relu(width, width),
            nn.MaxPool2d(2),
            conv_bn_relu(width, 2 * width),
        )
        self.classifier = nn.Linear(2 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.features(x)
        return self.classifier(out.mean(dim=(2, 3)))


def pointwise_cnn(num_classes: int = 10, in_channels: int = 1, **kw: int) -> SmallCNN:
    """SmallCNN with a pointwise (1x1) stem: the spatial reach is all in the substituted convs."""
    return SmallCNN(num_classes=num_classes, in_channels=in_channels, **{"stem_kernel": 1, **kw})
