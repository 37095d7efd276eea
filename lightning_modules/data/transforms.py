"""Tensor-only augmentations (no torchvision): random crop with zero padding and horizontal flip."""
from __future__ import annotations

import torch
import torch.nn.functional as F


class RandomCropFlip:
    """Pad a ``[C, H, W]`` image by ``padding`` zeros, crop back at a random offset, flip with p=0.5."""

    def __init__(self, padding: int = 4, flip: bool = True) -> None:
        self.padding = padding
        self.flip = flip

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        if self.padding > 0:
            _, height, width = image.shape
            padded = F.pad(image, (self.padding,) * 4)
            top, left = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
            image = padded[:, top:top + height, left:left + width]
        if self.flip and torch.rand(()) < 0.5:
            image = image.flip(-1)
        return image


class RandomFlip(RandomCropFlip):
    """Horizontal flip with p=0.5 only."""

    def __init__(self) -> None:
        super().__init__(padding=0, flip=True)
