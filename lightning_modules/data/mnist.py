"""MNIST from its raw IDX files (``train-images-idx3-ubyte`` etc., optionally ``.gz``) in a local folder."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import torch

from syno_automl.errors import DatasetFormatError

from .base import ClassificationDataModule, TensorImageDataset
from .files import find_dataset_dir, resolve_file

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (``00 00 <dtype> <ndim>`` magic, big-endian int32 sizes, then the data)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DatasetFormatError(f"{path}: not an IDX file (bad magic number {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    offset = 4 + 4 * ndim
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - offset != expected:
        raise DatasetFormatError(f"{path}: header says shape {shape} ({expected} bytes) but "
                                 f"{len(data) - offset} follow")
    return np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape)


class MNISTDataModule(ClassificationDataModule):
    """MNIST: train on the 60k training files, validate on the 10k test files.

    ``data_dir`` may hold the files directly, or in ``MNIST/raw/`` (torchvision's layout).
    """

    num_classes = 10
    in_channels = 1
    image_size = 28

    def __init__(self, data_dir: str | Path, batch_size: int = 64, num_workers: int = 0) -> None:
        super().__init__(batch_size, num_workers)
        self.data_dir = Path(data_dir)

    def prepare_data(self) -> None:
        find_dataset_dir(self.data_dir, ("", "MNIST/raw"), MNIST_FILES, "MNIST", gz_ok=True)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        folder = find_dataset_dir(self.data_dir, ("", "MNIST/raw"), MNIST_FILES, "MNIST", gz_ok=True)
        arrays = [read_idx(resolve_file(folder / name, gz_ok=True)) for name in MNIST_FILES]
        train_x, train_y, test_x, test_y = (torch.from_numpy(a.copy()) for a in arrays)
        self.train_set = TensorImageDataset(train_x.unsqueeze(1), train_y, MNIST_MEAN, MNIST_STD)
        self.val_set = TensorImageDataset(test_x.unsqueeze(1), test_y, MNIST_MEAN, MNIST_STD)
