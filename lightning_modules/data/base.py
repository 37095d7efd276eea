"""Shared pieces of the image data modules: an in-memory dataset and a module holding train/val splits."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, random_split

from syno_automl.errors import DatasetFormatError, OptionError

Transform = Callable[[torch.Tensor], torch.Tensor]


class TensorImageDataset(Dataset):
    """Images ``[N, C, H, W]`` (uint8 0..255 or float 0..1) with labels, normalized per channel on access."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, mean: Sequence[float], std: Sequence[float],
                 transform: Transform | None = None) -> None:
        if len(images) != len(labels):
            raise DatasetFormatError(f"{len(images)} images but {len(labels)} labels")
        self.images = images
        self.labels = labels.long()
        self.mean = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        image = image.float() / 255.0 if image.dtype == torch.uint8 else image.float()
        if self.transform is not None:
            image = self.transform(image)
        return (image - self.mean) / self.std, self.labels[index]


class ClassificationDataModule(L.LightningDataModule):
    """Base for image classification data: subclasses fill ``train_set``/``val_set`` in ``setup``.

    Subclasses set ``num_classes``, ``in_channels`` and ``image_size`` so a backbone can be sized from them.
    """

    num_classes: int
    in_channels: int
    image_size: int

    def __init__(self, batch_size: int = 64, num_workers: int = 0) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.pin_memory = False   # set True when training on a GPU: page-locked batches copy to it asynchronously
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None

    def _loader(self, train: bool) -> DataLoader:
        if self.train_set is None or self.val_set is None:
            self.setup("fit")
        dataset = self.train_set if train else self.val_set
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=train, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0, pin_memory=self.pin_memory)

    def train_dataloader(self) -> DataLoader:
        return self._loader(train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(train=False)


def seeded_split(count: int, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic permutation of ``range(count)`` cut into (train indices, val indices)."""
    if not 0.0 < val_fraction < 1.0:
        raise OptionError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n_val = max(1, int(round(count * val_fraction)))
    # validation first: the same randperm cut as before random_split, so a seed keeps its split
    val, train = random_split(range(count), [n_val, count - n_val], generator=torch.Generator().manual_seed(seed))
    return torch.tensor(train.indices, dtype=torch.long), torch.tensor(val.indices, dtype=torch.long)
