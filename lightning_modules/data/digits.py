"""scikit-learn's bundled 8x8 handwritten digits, upscaled: the embedded default dataset (no download)."""
from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from syno_automl.errors import OptionError

from .base import ClassificationDataModule, TensorImageDataset, seeded_split


def _digits_file() -> Path | None:
    """scikit-learn's ``datasets/data/digits.csv.gz``, found without importing scikit-learn (None if it is not
    there)."""
    spec = importlib.util.find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 digits as ``sklearn.datasets.load_digits`` gives them: images ``[N, 8, 8]`` (float64, 0-16) and
    their labels (int). Read from the file scikit-learn ships, as its function reads it, without importing
    scikit-learn (~1 s of CPU: pandas, narwhals, scipy's modules), which it does only where that file is not
    found."""
    path = _digits_file()
    if path is None:
        from sklearn.datasets import load_digits

        bunch = load_digits()
        return bunch.images, bunch.target
    with gzip.open(path, mode="rt", encoding="utf-8") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int, copy=False)


def load_digits_tensors(image_size: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 digits as floats in [0, 1] of shape ``[N, 1, S, S]`` (bilinear upscaling) and their labels."""
    raw, target = load_digits_arrays()
    images = torch.as_tensor(raw, dtype=torch.float32).unsqueeze(1) / 16.0
    if image_size != 8:
        images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", align_corners=False)
    return images.clamp_(0.0, 1.0), torch.as_tensor(target, dtype=torch.long)


class DigitsDataModule(ClassificationDataModule):
    """Digits split into train/val by a seeded permutation and normalized with the train split's statistics.

    Example:
        >>> dm = DigitsDataModule(image_size=16); dm.setup("fit")
        >>> next(iter(dm.train_dataloader()))[0].shape
        torch.Size([64, 1, 16, 16])
    """

    num_classes = 10
    in_channels = 1

    def __init__(self, image_size: int = 16, batch_size: int = 64, val_fraction: float = 0.2, seed: int = 0,
                 num_workers: int = 0) -> None:
        super().__init__(batch_size, num_workers)
        if image_size < 8:
            raise OptionError(f"image_size must be at least 8 (the digits are 8x8), got {image_size}")
        self.image_size = image_size
        self.val_fraction = val_fraction
        self.seed = seed

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        images, labels = load_digits_tensors(self.image_size)
        train_idx, val_idx = seeded_split(len(images), self.val_fraction, self.seed)
        mean, std = images[train_idx].mean().item(), images[train_idx].std().item()
        self.train_set = TensorImageDataset(images[train_idx], labels[train_idx], [mean], [std])
        self.val_set = TensorImageDataset(images[val_idx], labels[val_idx], [mean], [std])
