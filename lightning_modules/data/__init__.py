"""Data modules: digits (embedded default), MNIST, CIFAR-10/100, an ImageNet-style folder, and text.

Example:
    >>> dm = build_datamodule("digits", image_size=16)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L

from syno_automl.errors import OptionError

from .digits import DigitsDataModule
from .folder_datasets import CIFAR10DataModule, CIFAR100DataModule, ImageFolderDataModule, MNISTDataModule
from .text import TextDataModule

_EMBEDDED = {"digits": DigitsDataModule, "text": TextDataModule}
_LOCAL = {"mnist": MNISTDataModule, "cifar10": CIFAR10DataModule, "cifar100": CIFAR100DataModule,
          "imagenet-folder": ImageFolderDataModule}
DATAMODULE_NAMES: tuple[str, ...] = ("digits", "mnist", "cifar10", "cifar100", "imagenet-folder", "text")


def build_datamodule(name: str, data_dir: str | Path | None = None, **kw: Any) -> L.LightningDataModule:
    """Build a data module by name; ``mnist``/``cifar10``/``cifar100``/``imagenet-folder`` need ``data_dir``."""
    key = name.lower().replace("_", "-")
    if key in _EMBEDDED:
        if key == "digits":
            if data_dir is not None:
                raise OptionError("the digits dataset is bundled with scikit-learn and takes no data_dir")
            return DigitsDataModule(**kw)
        return TextDataModule(data_dir, **kw)
    if key in _LOCAL:
        if data_dir is None:
            raise OptionError(f"dataset {name!r} is read from a local folder: pass data_dir (datasets are not "
                              f"downloaded)")
        return _LOCAL[key](data_dir, **kw)
    raise OptionError(f"unknown dataset {name!r}; known datasets: {', '.join(DATAMODULE_NAMES)}")


__all__ = ["CIFAR100DataModule", "CIFAR10DataModule", "DATAMODULE_NAMES", "DigitsDataModule",
           "ImageFolderDataModule", "MNISTDataModule", "TextDataModule", "build_datamodule"]
