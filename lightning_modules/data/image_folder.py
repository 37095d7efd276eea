"""An ImageNet-style folder: ``root/train/<class>/*.jpg|png`` (and ``root/val/<class>/...``), read with Pillow."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from syno_automl.errors import DatasetFormatError, DatasetNotFoundError, MissingDependencyError

from .base import ClassificationDataModule, seeded_split
from .transforms import RandomFlip

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _require_pillow():  # noqa: ANN202 - returns the PIL.Image module
    try:
        from PIL import Image
    except ImportError as error:
        raise MissingDependencyError("the imagenet-folder dataset reads images with Pillow: "
                                     "pip install pillow") from error
    return Image


def list_image_folder(split_dir: Path) -> tuple[list[tuple[Path, int]], list[str]]:
    """Sorted ``(image path, class index)`` pairs and the sorted class names of ``split_dir/<class>/``."""
    if not split_dir.is_dir():
        raise DatasetNotFoundError(f"imagenet-folder: expected a folder {split_dir} with one sub-folder per class "
                                   f"holding {'/'.join(IMAGE_SUFFIXES)} images, e.g. {split_dir}/<class>/0001.jpg")
    classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
    samples = [(path, index) for index, name in enumerate(classes)
               for path in sorted((split_dir / name).iterdir()) if path.suffix.lower() in IMAGE_SUFFIXES]
    if not samples:
        raise DatasetNotFoundError(f"imagenet-folder: no {'/'.join(IMAGE_SUFFIXES)} images under {split_dir}/<class>/")
    return samples, classes


class ImageFileDataset(Dataset):
    """Reads, converts to RGB, resizes to ``image_size`` squared and normalizes with ImageNet statistics."""

    def __init__(self, samples: list[tuple[Path, int]], image_size: int, train: bool) -> None:
        self.samples = samples
        self.image_size = image_size
        self.flip = RandomFlip() if train else None
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image_module = _require_pillow()
        path, label = self.samples[index]
        with image_module.open(path) as image:
            image = image.convert("RGB").resize((self.image_size, self.image_size), image_module.BILINEAR)
            array = np.asarray(image, dtype=np.uint8)
        tensor = torch.from_numpy(array.copy()).permute(2, 0, 1).float() / 255.0
        if self.flip is not None:
            tensor = self.flip(tensor)
        return (tensor - self.mean) / self.std, torch.tensor(label)


class ImageFolderDataModule(ClassificationDataModule):
    """Train on ``root/train``; validate on ``root/val`` if present, else on a seeded split of ``root/train``."""

    in_channels = 3

    def __init__(self, data_dir: str | Path, image_size: int = 224, batch_size: int = 64, num_workers: int = 0,
                 val_fraction: float = 0.1, seed: int = 0) -> None:
        super().__init__(batch_size, num_workers)
        self.data_dir = Path(data_dir)
        self.image_size = image_size
        self.val_fraction = val_fraction
        self.seed = seed
        self.classes: list[str] = []

    @property
    def num_classes(self) -> int:  # type: ignore[override]
        if not self.classes:
            self.classes = list_image_folder(self.data_dir / "train")[1]
        return len(self.classes)

    def prepare_data(self) -> None:
        _require_pillow()
        list_image_folder(self.data_dir / "train")

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        _require_pillow()
        train, self.classes = list_image_folder(self.data_dir / "train")
        if (self.data_dir / "val").is_dir():
            val, val_classes = list_image_folder(self.data_dir / "val")
            if val_classes != self.classes:
                raise DatasetFormatError(f"imagenet-folder: class folders differ between {self.data_dir / 'train'} and "
                                         f"{self.data_dir / 'val'}: {sorted(set(self.classes) ^ set(val_classes))}")
        else:
            train_idx, val_idx = seeded_split(len(train), self.val_fraction, self.seed)
            train, val = [train[i] for i in train_idx.tolist()], [train[i] for i in val_idx.tolist()]
        self.train_set = ImageFileDataset(train, self.image_size, train=True)
        self.val_set = ImageFileDataset(val, self.image_size, train=False)
