"""Whether a ``--data-dir`` holds what its dataset's module will read, told before torch and Lightning load (tens of
seconds) and before a study database is made: the same files and folders the data modules of ``lightning_modules``
look for (MNIST's IDX files, CIFAR's pickled batches, an ImageNet-style ``train/<class>/`` folder, text files),
listed here so that nothing heavy is imported (tests/cli/test_early_refusals_46.py keeps the two in step). Light: the
standard library only; reads names, never file contents.

Example:
    >>> missing_data("digits", None) is None   # embedded: nothing to look for
    True
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["missing_data", "EXPECTED_FILES", "IMAGE_SUFFIXES", "TEXT_SUFFIXES"]

# dataset -> (the sub-folders tried in order, the files one of them must hold all of, gzip allowed)
EXPECTED_FILES: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "mnist": (("", "MNIST/raw"), ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                  "t10k-labels-idx1-ubyte"), True),
    "cifar10": (("cifar-10-batches-py", ""), tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",), False),
    "cifar100": (("cifar-100-python", ""), ("train", "test"), False),
}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")          # lightning_modules/data/image_folder.py
TEXT_SUFFIXES = (".txt", ".md", ".py")              # lightning_modules/data/text.py
_SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def _has(folder: Path, name: str, gz_ok: bool) -> bool:
    return (folder / name).is_file() or (gz_ok and (folder / f"{name}.gz").is_file())


def missing_data(dataset: str, data_dir: str | None) -> str | None:
    """Why `data_dir` cannot hold `dataset` (one line naming the folder and what it lacks), or None: it can, or the
    dataset is embedded, or no folder is given (another check's)."""
    if data_dir is None:
        return None
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        return f"--data-dir {data_dir} is not a folder"
    dataset = dataset.lower().replace("_", "-")   # as SearchConfig.validate reads it
    if dataset in EXPECTED_FILES:
        subs, files, gz_ok = EXPECTED_FILES[dataset]
        if any(all(_has(root / sub, name, gz_ok) for name in files) for sub in subs):
            return None
        where = " or ".join(str(root / sub) if sub else str(root) for sub in subs)
        return (f"--data-dir {data_dir} does not hold {dataset}: expected {', '.join(files)}"
                f"{' (or .gz)' if gz_ok else ''} in {where} (datasets are not downloaded: place the files there)")
    if dataset == "imagenet-folder":
        train = root / "train"
        classes = [p for p in sorted(train.iterdir()) if p.is_dir()] if train.is_dir() else []
        if any(f.suffix.lower() in IMAGE_SUFFIXES for c in classes for f in c.iterdir()):
            return None
        return (f"--data-dir {data_dir} does not hold an ImageNet-style dataset: expected {train}/<class>/ folders "
                f"of {'/'.join(IMAGE_SUFFIXES)} images")
    if dataset == "text":
        for _parent, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(".")]
            if any(n.endswith(TEXT_SUFFIXES) and not n.startswith(".") for n in names):
                return None
        return f"--data-dir {data_dir} holds no {'/'.join(TEXT_SUFFIXES)} files for the text corpus"
    return None
