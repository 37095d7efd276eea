"""Data modules (lightning_modules.data): the embedded digits and text corpora, and readers of the real on-disk
formats."""
from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_modules.data import (
    CIFAR10DataModule,
    CIFAR100DataModule,
    DigitsDataModule,
    ImageFolderDataModule,
    MNISTDataModule,
    TextDataModule,
    build_datamodule,
)
from lightning_modules.data.mnist import MNIST_FILES, read_idx
from lightning_modules.data.text import decode, read_corpus

# --- digits -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("image_size", [8, 16, 32])
def test_digits_batches_have_the_requested_size(image_size: int) -> None:
    dm = DigitsDataModule(image_size=image_size, batch_size=32)
    dm.setup("fit")
    images, labels = next(iter(dm.train_dataloader()))
    assert images.shape == (32, 1, image_size, image_size) and images.dtype == torch.float32
    assert labels.shape == (32,) and labels.dtype == torch.long
    assert len(dm.train_set) + len(dm.val_set) == 1797
    assert len(dm.val_set) == round(1797 * 0.2)


def test_digits_split_is_seeded_and_normalized() -> None:
    first, again, other = DigitsDataModule(seed=0), DigitsDataModule(seed=0), DigitsDataModule(seed=1)
    for dm in (first, again, other):
        dm.setup("fit")
    assert torch.equal(first.val_set.images, again.val_set.images)
    assert torch.equal(first.val_set.labels, again.val_set.labels)
    assert not torch.equal(first.val_set.labels, other.val_set.labels)
    train = torch.stack([first.train_set[i][0] for i in range(len(first.train_set))])
    assert abs(train.mean().item()) < 1e-3 and abs(train.std().item() - 1.0) < 1e-2


def test_digits_are_scikit_learns_read_without_importing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file scikit-learn ships, read as its load_digits reads it: the same images and labels, without importing
    scikit-learn (~1 s of CPU at every search's start); its own function where the file is not found."""
    import builtins

    from lightning_modules.data import digits

    def no_sklearn(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - __import__'s signature
        assert not name.startswith("sklearn"), f"imported {name}"
        return importing(name, *args, **kwargs)

    importing = builtins.__import__
    with monkeypatch.context() as blocked:   # any import of scikit-learn fails meanwhile
        blocked.setattr(builtins, "__import__", no_sklearn)
        images, target = digits.load_digits_arrays()
        assert tuple(digits.load_digits_tensors(8)[0].shape) == (1797, 1, 8, 8)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    assert images.dtype == bunch.images.dtype and np.array_equal(images, bunch.images)
    assert target.dtype == bunch.target.dtype and np.array_equal(target, bunch.target)
    monkeypatch.setattr(digits, "_digits_file", lambda: None)   # no file: scikit-learn's own function
    again, labels = digits.load_digits_arrays()
    assert np.array_equal(again, images) and np.array_equal(labels, target)


# --- missing data names the expected files -------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("mnist", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte", "MNIST/raw"]),
    ("cifar10", ["cifar-10-batches-py", "data_batch_1", "data_batch_5", "test_batch"]),
    ("cifar100", ["cifar-100-python", "train", "test"]),
    ("imagenet-folder", ["train", "<class>"]),
])
def test_missing_dataset_error_names_the_expected_files(tmp_path: Path, name: str, expected: list[str]) -> None:
    dm = build_datamodule(name, data_dir=tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError) as error:
        dm.setup("fit")
    message = str(error.value)
    assert str(tmp_path / "nowhere") in message
    assert all(part in message for part in expected), message


@pytest.mark.parametrize("name, kw, message", [
    ("svhn", {}, "known datasets: digits, mnist1d, mnist, cifar10, cifar100, imagenet-folder, text"),
    ("cifar10", {}, "pass data_dir"),
])
def test_build_datamodule_rejects_bad_requests(name: str, kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_datamodule(name, **kw)


def test_build_datamodule_gives_the_embedded_defaults() -> None:
    assert isinstance(build_datamodule("digits", image_size=8), DigitsDataModule)
    assert isinstance(build_datamodule("text", seq_len=16), TextDataModule)


# --- MNIST (IDX files) ---------------------------------------------------------------------------------------

def write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)


def write_fake_mnist(folder: Path, n_train: int, n_test: int, compress: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        write_idx(folder / name, array, compress)
    return arrays


@pytest.mark.parametrize("layout, compress", [("", False), ("", True), ("MNIST/raw", True)])
def test_mnist_reads_raw_idx_files(tmp_path: Path, layout: str, compress: bool) -> None:
    arrays = write_fake_mnist(tmp_path / layout, n_train=6, n_test=4, compress=compress)
    dm = MNISTDataModule(tmp_path, batch_size=6)
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set)) == (6, 4)
    images, labels = next(iter(dm.val_dataloader()))
    assert images.shape == (4, 1, 28, 28)
    assert labels.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    raw = arrays["t10k-images-idx3-ubyte"][0, 3, 5] / 255.0
    assert images[0, 0, 3, 5].item() == pytest.approx((raw - 0.1307) / 0.3081, abs=1e-5)


def test_read_idx_rejects_a_file_that_is_not_idx(tmp_path: Path) -> None:
    (tmp_path / "bad").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")


def test_mnist_error_lists_only_what_is_missing_as_expected(tmp_path: Path) -> None:
    write_fake_mnist(tmp_path, 2, 2, compress=False)
    (tmp_path / MNIST_FILES[3]).unlink()
    with pytest.raises(FileNotFoundError, match=MNIST_FILES[3]):
        MNISTDataModule(tmp_path).setup("fit")


# --- CIFAR (python pickle batches) ---------------------------------------------------------------------------

def write_cifar_batch(path: Path, n: int, label_key: bytes, num_classes: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    batch = {b"batch_label": b"fake", b"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8),
             label_key: rng.integers(0, num_classes, n).tolist()}
    with open(path, "wb") as handle:
        pickle.dump(batch, handle, protocol=2)
    return batch


def test_cifar10_reads_the_five_training_batches_and_the_test_batch(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i in range(1, 6):
        write_cifar_batch(folder / f"data_batch_{i}", 3, b"labels", 10, seed=i)
    test = write_cifar_batch(folder / "test_batch", 4, b"labels", 10, seed=9)
    dm = CIFAR10DataModule(tmp_path, batch_size=4, augment=False)
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), dm.num_classes) == (15, 4, 10)
    images, labels = next(iter(dm.val_dataloader()))
    assert images.shape == (4, 3, 32, 32) and labels.tolist() == test[b"labels"]
    # Rows are 1024 red, then 1024 green, then 1024 blue values, each row-major 32x32.
    green_at_2_7 = test[b"data"][0, 1024 + 2 * 32 + 7] / 255.0
    assert images[0, 1, 2, 7].item() == pytest.approx((green_at_2_7 - 0.4822) / 0.2435, abs=1e-5)


def test_cifar100_reads_fine_labels_and_augments_only_training_images(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    write_cifar_batch(folder / "train", 5, b"fine_labels", 100, seed=1)
    test = write_cifar_batch(folder / "test", 2, b"fine_labels", 100, seed=2)
    dm = CIFAR100DataModule(folder, batch_size=8)  # the extracted folder itself is accepted too
    dm.setup("fit")
    assert dm.num_classes == 100 and len(dm.train_set) == 5
    assert dm.train_set.transform is not None and dm.val_set.transform is None
    assert dm.train_set[0][0].shape == (3, 32, 32)
    assert next(iter(dm.val_dataloader()))[1].tolist() == test[b"fine_labels"]


# --- ImageNet-style folder -----------------------------------------------------------------------------------

def write_image_folder(root: Path, classes: list[str], per_class: int) -> None:
    from PIL import Image

    for index, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        for j in range(per_class):
            color = (40 * index, 10 * j, 200)
            Image.new("RGB", (12, 10), color).save(root / name / f"{j:03d}.{'png' if j % 2 else 'jpg'}")


def test_image_folder_with_a_val_folder(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    write_image_folder(tmp_path / "train", ["cat", "dog", "eel"], 3)
    write_image_folder(tmp_path / "val", ["cat", "dog", "eel"], 1)
    dm = build_datamodule("imagenet-folder", data_dir=tmp_path, image_size=8, batch_size=3)
    dm.setup("fit")
    assert (dm.num_classes, dm.classes) == (3, ["cat", "dog", "eel"])
    assert (len(dm.train_set), len(dm.val_set)) == (9, 3)
    images, labels = next(iter(dm.val_dataloader()))
    assert images.shape == (3, 3, 8, 8) and labels.tolist() == [0, 1, 2]


def test_image_folder_without_val_splits_train_deterministically(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    write_image_folder(tmp_path / "train", ["a", "b"], 5)
    splits = []
    for _ in range(2):
        dm = ImageFolderDataModule(tmp_path, image_size=8, val_fraction=0.2)
        dm.setup("fit")
        splits.append([path.name for path, _ in dm.val_set.samples])
    assert len(splits[0]) == 2 and splits[0] == splits[1]


# --- text ----------------------------------------------------------------------------------------------------

def test_embedded_text_corpus_is_bounded_deterministic_stdlib_source() -> None:
    first, again = TextDataModule(seq_len=32, max_bytes=50_000), TextDataModule(seq_len=32, max_bytes=50_000)
    first.setup("fit")
    again.setup("fit")
    assert torch.equal(first.train_set.tokens, again.train_set.tokens)
    total = len(first.train_set.tokens) + len(first.val_set.tokens)
    assert total == 50_000 and len(first.val_set.tokens) == 5_000
    assert all(path.suffix == ".py" for path in first.corpus_files())
    tokens, targets = next(iter(first.train_dataloader()))
    assert tokens.shape == targets.shape == (32, 32) and int(tokens.max()) < 256
    assert "import" in decode(first.train_set.tokens[:20_000])


def test_text_windows_predict_the_next_byte_and_val_is_the_held_out_tail(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha " * 100)
    (tmp_path / "sub" / "b.md").write_text("# beta\n" * 100)
    (tmp_path / "c.py").write_text("x = 1\n" * 100)
    (tmp_path / "ignored.bin").write_bytes(b"\x00" * 1000)
    dm = TextDataModule(tmp_path, seq_len=16, batch_size=4, val_fraction=0.25)
    dm.setup("fit")
    assert [p.name for p in dm.corpus_files()] == ["a.txt", "c.py", "b.md"]
    corpus = read_corpus(dm.corpus_files())
    assert bytes(dm.val_set.tokens.tolist()) == corpus[-len(dm.val_set.tokens):]
    assert len(dm.val_set.tokens) == len(corpus) // 4
    tokens, targets = dm.train_set[3]
    assert torch.equal(tokens[1:], targets[:-1])
    assert bytes(tokens.tolist()) == corpus[48:64]


@pytest.mark.parametrize("make", ["missing", "empty", "only_binary"])
def test_text_folder_without_text_files_is_a_clear_error(tmp_path: Path, make: str) -> None:
    folder = tmp_path / "corpus"
    if make != "missing":
        folder.mkdir()
    if make == "only_binary":
        (folder / "x.bin").write_bytes(b"abc")
    with pytest.raises(FileNotFoundError, match="corpus"):
        TextDataModule(folder).setup("fit")


def test_text_corpus_too_small_for_the_sequence_length(tmp_path: Path) -> None:
    (tmp_path / "tiny.txt").write_text("hello world")
    with pytest.raises(ValueError, match="too small"):
        TextDataModule(tmp_path, seq_len=64).setup("fit")


def test_char_tokens_have_the_corpus_vocabulary_and_round_trip(tmp_path: Path) -> None:
    text = "abcab ça!\n" * 300
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    dm = TextDataModule(tmp_path, seq_len=16, batch_size=4, tokenizer="char")
    dm.setup("fit")
    assert dm.chars == sorted(set(text + "\n")) and dm.vocab_size == len(dm.chars)
    x, y = dm.train_set[0]
    assert "".join(dm.chars[i] for i in x.tolist()) == (text + "\n")[:16]
    assert torch.equal(x[1:], y[:-1])


def test_unknown_or_unavailable_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello world " * 200)
    with pytest.raises(ValueError, match="tokenizer must be"):
        TextDataModule(tmp_path, tokenizer="words")
    with pytest.raises(ValueError, match="not available here"):
        TextDataModule(tmp_path, seq_len=8, tokenizer="tiktoken:no_such_encoding").setup("fit")
