"""CIFAR-10 and CIFAR-100 from the official python pickle batches in a local folder."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from syno_automl.errors import DatasetFormatError

from .base import ClassificationDataModule, TensorImageDataset
from .files import find_dataset_dir
from .transforms import RandomCropFlip

CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
CIFAR100_FOLDER = "cifar-100-python"
CIFAR100_FILES = ("train", "test")
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


def read_cifar_batch(path: str | Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """Images ``[N, 3, 32, 32]`` uint8 and labels from one pickled CIFAR batch."""
    with open(path, "rb") as handle:
        batch = pickle.load(handle, encoding="bytes")
    key = label_key.encode()
    if b"data" not in batch or key not in batch:
        raise DatasetFormatError(f"{path}: not a CIFAR batch (keys {sorted(batch)}; expected b'data' and {key!r})")
    images = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    return images, np.asarray(batch[key], dtype=np.int64)


class _CIFARDataModule(ClassificationDataModule):
    """Common CIFAR reader: ``data_dir`` is the extracted folder itself or its parent."""

    in_channels = 3
    image_size = 32
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    label_key: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    dataset_name: str

    def __init__(self, data_dir: str | Path, batch_size: int = 128, num_workers: int = 0,
                 augment: bool = True) -> None:
        super().__init__(batch_size, num_workers)
        self.data_dir = Path(data_dir)
        self.augment = augment

    def _folder(self) -> Path:
        files = self.train_files + (self.test_file,)
        return find_dataset_dir(self.data_dir, (self.folder, ""), files, self.dataset_name)

    def prepare_data(self) -> None:
        self._folder()

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        folder = self._folder()
        parts = [read_cifar_batch(folder / name, self.label_key) for name in self.train_files]
        train_x = torch.from_numpy(np.concatenate([p[0] for p in parts]))
        train_y = torch.from_numpy(np.concatenate([p[1] for p in parts]))
        test_x, test_y = read_cifar_batch(folder / self.test_file, self.label_key)
        transform = RandomCropFlip(padding=4) if self.augment else None
        self.train_set = TensorImageDataset(train_x, train_y, self.mean, self.std, transform)
        self.val_set = TensorImageDataset(torch.from_numpy(test_x), torch.from_numpy(test_y), self.mean, self.std)


class CIFAR10DataModule(_CIFARDataModule):
    """CIFAR-10 (``cifar-10-batches-py/data_batch_1..5, test_batch``); validates on the test batch."""

    num_classes = 10
    folder = CIFAR10_FOLDER
    train_files = CIFAR10_FILES[:5]
    test_file = "test_batch"
    label_key = "labels"
    mean, std = CIFAR10_MEAN, CIFAR10_STD
    dataset_name = "CIFAR-10"


class CIFAR100DataModule(_CIFARDataModule):
    """CIFAR-100 (``cifar-100-python/train, test``, fine labels); validates on the test file."""

    num_classes = 100
    folder = CIFAR100_FOLDER
    train_files = ("train",)
    test_file = "test"
    label_key = "fine_labels"
    mean, std = CIFAR100_MEAN, CIFAR100_STD
    dataset_name = "CIFAR-100"
