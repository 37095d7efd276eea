"""Language-modelling data from text files (byte-, char- or tiktoken-level); the embedded default is the Python
stdlib's sources."""
from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from syno_automl.errors import DatasetFormatError, DatasetNotFoundError, OptionError

TEXT_SUFFIXES = (".txt", ".md", ".py")
DEFAULT_CORPUS_BYTES = 1_000_000
BYTE_VOCAB_SIZE = 256
_SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def stdlib_dir() -> Path:
    """The running interpreter's standard library folder."""
    return Path(sysconfig.get_paths()["stdlib"])


def list_text_files(folder: Path, suffixes: tuple[str, ...] = TEXT_SUFFIXES) -> list[Path]:
    """Text files under ``folder`` (recursive), sorted by relative path; skips site/dist-packages, caches, dotfiles."""
    if not folder.is_dir():
        raise DatasetNotFoundError(f"text corpus: folder {folder} does not exist")
    files: list[Path] = []
    for parent, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(".")]
        files.extend(Path(parent, name) for name in names if name.endswith(suffixes) and not name.startswith("."))
    if not files:
        raise DatasetNotFoundError(f"text corpus: no {'/'.join(suffixes)} files under {folder}")
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def read_corpus(files: list[Path], max_bytes: int | None = None) -> bytes:
    """Concatenate files (newline between them), cut at ``max_bytes``; deterministic for a given file list."""
    parts, total = [], 0
    for path in files:
        data = path.read_bytes() + b"\n"
        if max_bytes is not None and total + len(data) > max_bytes:
            parts.append(data[: max_bytes - total])
            break
        parts.append(data)
        total += len(data)
    return b"".join(parts)


class TokenChunkDataset(Dataset):
    """Non-overlapping windows: item i is (tokens[iL : iL+L], tokens[iL+1 : iL+L+1]) for L = ``seq_len``."""

    def __init__(self, tokens: torch.Tensor, seq_len: int) -> None:
        if len(tokens) < seq_len + 1:
            raise DatasetFormatError(f"{len(tokens)} tokens are fewer than seq_len + 1 = {seq_len + 1}")
        self.tokens = tokens
        self.seq_len = seq_len

    def __len__(self) -> int:
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * self.seq_len
        window = self.tokens[start: start + self.seq_len + 1]
        return window[:-1], window[1:]


def encode(corpus: bytes, tokenizer: str) -> tuple[torch.Tensor, int, list[str] | None]:
    """(token ids, vocabulary size, the characters of a char vocabulary) of ``corpus`` under ``tokenizer``:
    ``"byte"`` (vocab 256), ``"char"`` (the corpus's distinct characters, sorted: deterministic for a corpus) or
    ``"tiktoken:NAME"`` (e.g. ``tiktoken:gpt2``; needs the tiktoken package and its encoding files)."""
    if tokenizer == "byte":
        return torch.frombuffer(bytearray(corpus), dtype=torch.uint8).long(), BYTE_VOCAB_SIZE, None
    text = corpus.decode("utf-8", errors="replace")
    if tokenizer == "char":
        chars = sorted(set(text))
        index = {c: i for i, c in enumerate(chars)}
        return torch.tensor([index[c] for c in text], dtype=torch.long), len(chars), chars
    if tokenizer.startswith("tiktoken:"):
        name = tokenizer.split(":", 1)[1]
        try:
            import tiktoken

            enc = tiktoken.get_encoding(name)
        except Exception as e:  # noqa: BLE001 -- not installed, unknown name, or its BPE files not fetched offline
            raise OptionError(f"tokenizer {tokenizer!r} is not available here ({type(e).__name__}: {e}); "
                              f"use 'byte' or 'char'") from None
        return torch.tensor(enc.encode_ordinary(text), dtype=torch.long), int(enc.n_vocab), None
    raise OptionError(f"tokenizer must be 'byte', 'char' or 'tiktoken:NAME', got {tokenizer!r}")


class TextDataModule(L.LightningDataModule):
    """A text corpus as tokens (bytes by default, vocab 256); the last ``val_fraction`` of it is held out.

    With ``data_dir=None`` the corpus is the stdlib's ``.py`` sources, sorted, first ``max_bytes`` bytes
    (default 1 MB); otherwise every ``.txt``/``.md``/``.py`` file under ``data_dir`` (all of it unless bounded).

    Example:
        >>> dm = TextDataModule(seq_len=64); dm.setup("fit")
        >>> next(iter(dm.train_dataloader()))[0].shape
        torch.Size([32, 64])
    """

    def __init__(self, data_dir: str | Path | None = None, seq_len: int = 128, batch_size: int = 32,
                 val_fraction: float = 0.1, max_bytes: int | None = None, num_workers: int = 0,
                 tokenizer: str = "byte") -> None:
        super().__init__()
        if tokenizer not in ("byte", "char") and not tokenizer.startswith("tiktoken:"):
            raise OptionError(f"tokenizer must be 'byte', 'char' or 'tiktoken:NAME', got {tokenizer!r}")
        self.tokenizer = tokenizer
        # known before setup for bytes; char and tiktoken vocabularies are read from the corpus / encoding
        self.vocab_size = BYTE_VOCAB_SIZE
        self.chars: list[str] | None = None
        if not 0.0 < val_fraction < 1.0:
            raise OptionError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.max_bytes = DEFAULT_CORPUS_BYTES if max_bytes is None and data_dir is None else max_bytes
        self.num_workers = num_workers
        self.pin_memory = False   # set True when training on a GPU (as the image data modules)
        self.train_set: TokenChunkDataset | None = None
        self.val_set: TokenChunkDataset | None = None

    def corpus_files(self) -> list[Path]:
        """The files the corpus is read from, in order."""
        if self.data_dir is None:
            return list_text_files(stdlib_dir(), (".py",))
        return list_text_files(self.data_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        corpus = read_corpus(self.corpus_files(), self.max_bytes)
        tokens, self.vocab_size, self.chars = encode(corpus, self.tokenizer)
        n_val = int(len(tokens) * self.val_fraction)
        if n_val < self.seq_len + 1:
            raise DatasetFormatError(f"text corpus of {len(tokens)} {self.tokenizer} tokens is too small: the "
                                     f"held-out {self.val_fraction:.0%} ({n_val} tokens) needs at least seq_len + 1 "
                                     f"= {self.seq_len + 1}")
        self.train_set = TokenChunkDataset(tokens[:-n_val], self.seq_len)
        self.val_set = TokenChunkDataset(tokens[-n_val:], self.seq_len)

    def _loader(self, train: bool) -> DataLoader:
        if self.train_set is None:
            self.setup("fit")
        return DataLoader(self.train_set if train else self.val_set, batch_size=self.batch_size, shuffle=train,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0,
                          pin_memory=self.pin_memory)

    def train_dataloader(self) -> DataLoader:
        return self._loader(train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(train=False)


def decode(tokens: torch.Tensor) -> str:
    """Byte tokens back to text (invalid UTF-8 replaced)."""
    return bytes(tokens.to(torch.uint8).tolist()).decode("utf-8", errors="replace")
