"""Locating a dataset's expected files, with errors that name every path that was looked for."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from syno_automl.errors import DatasetNotFoundError


def find_dataset_dir(data_dir: str | Path, candidates: Sequence[str], required: Sequence[str],
                     dataset: str, gz_ok: bool = False) -> Path:
    """First of ``data_dir/<candidate>`` holding all ``required`` files (or their ``.gz`` when ``gz_ok``).

    Raises ``FileNotFoundError`` listing the expected files under every candidate folder.
    """
    root = Path(data_dir).expanduser()
    for sub in candidates:
        folder = root / sub if sub else root
        if all(_existing(folder / name, gz_ok) is not None for name in required):
            return folder
    folders = [str(root / sub) if sub else str(root) for sub in candidates]
    suffix = " (optionally gzip-compressed, ending in .gz)" if gz_ok else ""
    raise DatasetNotFoundError(
        f"{dataset}: expected files {', '.join(required)}{suffix} in one of: {'; '.join(folders)}; "
        f"none of these folders holds them all. Datasets are not downloaded: place the files there.")


def resolve_file(path: Path, gz_ok: bool = False) -> Path:
    """``path`` itself, or ``path.gz`` when allowed; FileNotFoundError naming it otherwise."""
    found = _existing(path, gz_ok)
    if found is None:
        raise DatasetNotFoundError(f"expected file {path}{' (or .gz)' if gz_ok else ''}")
    return found


def _existing(path: Path, gz_ok: bool) -> Path | None:
    if path.is_file():
        return path
    gz = path.with_name(path.name + ".gz")
    return gz if gz_ok and gz.is_file() else None
