"""Datasets read from a local ``data_dir`` (never downloaded): MNIST, CIFAR-10/100 and an ImageNet-style folder."""
from __future__ import annotations

from .cifar import CIFAR10DataModule, CIFAR100DataModule, read_cifar_batch
from .image_folder import ImageFolderDataModule
from .mnist import MNISTDataModule, read_idx

__all__ = ["CIFAR100DataModule", "CIFAR10DataModule", "ImageFolderDataModule", "MNISTDataModule",
           "read_cifar_batch", "read_idx"]
