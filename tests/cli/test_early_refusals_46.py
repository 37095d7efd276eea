"""Refusals before the heavy imports (issue 46, item 6): a damaged syno.db or mlflow.db named, a read-only folder, a
--data-dir that does not hold its dataset (and nothing left behind), CUDA targets where no CUDA device can be.

Each command runs in a fresh interpreter, which reports the libraries it loaded: the refusal is checked to come
before torch, Lightning, MLflow, Optuna and SQLAlchemy (not by a clock). The times measured on the project's machine
are in the issue's note."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from _cli_helpers import cli_env

from syno_automl.cli.preflight import check_writable
from syno_automl.data_check import EXPECTED_FILES, IMAGE_SUFFIXES, TEXT_SUFFIXES
from syno_automl.errors import ReadOnlyError

HEAVY = ("torch", "lightning", "mlflow", "optuna", "sqlalchemy", "tvm")
PROBE = ("import sys\nfrom syno_automl.cli import main\ncode = main(sys.argv[1:])\n"
         f"print('LOADED', *[m for m in {HEAVY!r} if m in sys.modules])\nsys.exit(code)")


def _refused(folder: Path, *args: str, env: dict[str, str] | None = None,
             prefix: tuple[str, ...] = ()) -> str:
    """The one error line of `syno-automl ARGS` run in `folder`, checked to exit 1 with none of HEAVY loaded."""
    done = subprocess.run([*prefix, sys.executable, "-c", PROBE, *args], cwd=folder, capture_output=True, text=True,
                          env={**cli_env(), **(env or {})}, timeout=120)
    assert done.returncode == 1, (args, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("syno-automl: error: "), (args, done.stderr)
    loaded = next(line for line in done.stdout.splitlines() if line.startswith("LOADED")).split()[1:]
    assert loaded == [], (args, loaded)
    return lines[0]


@pytest.mark.parametrize("command", [("search", "--trials", "1"), ("search", "--resume"), ("show",), ("report",),
                                     ("reevaluate", "best"), ("tune", "best")])
def test_a_study_database_that_is_not_one_is_named(tmp_path, command):
    (tmp_path / "syno.db").write_text("these are not the bytes of a database\n")
    line = _refused(tmp_path, *command)
    assert f"{tmp_path / 'syno.db'} is not an SQLite database" in line and "--storage" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syno.db"]   # nothing made beside it


def _damaged(path: Path) -> None:
    """A real SQLite file (its header sound) whose pages past the first are overwritten."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a, b)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 200) for i in range(3000)])
    con.close()
    with open(path, "r+b") as f:
        f.seek(4096 * 4)
        f.write(b"\xff" * 16384)


def test_a_damaged_study_database_is_named(tmp_path):
    _damaged(tmp_path / "syno.db")
    line = _refused(tmp_path, "show")
    assert f"{tmp_path / 'syno.db'} is a damaged SQLite database" in line, line


def test_a_damaged_mlflow_store_is_named(tmp_path):
    _damaged(tmp_path / "mlflow.db")
    line = _refused(tmp_path, "search", "--trials", "1")
    assert f"--tracking-uri sqlite:///mlflow.db: {tmp_path / 'mlflow.db'} is a damaged SQLite database" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]   # no syno.db made


def _read_only_mount() -> tuple[str, ...] | None:
    """A command prefix under which a fresh folder is a read-only filesystem for root (a user namespace with a
    read-only tmpfs), or None where namespaces are not allowed."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return ("unshare", "-rm") if probe.returncode == 0 else None


def test_a_read_only_folder_is_refused_before_the_imports(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:   # an ordinary user: the folder's mode is enough
        folder.chmod(0o555)
        line = _refused(folder, "search", "--trials", "1")
    else:   # root writes anywhere but on a read-only filesystem: one, mounted for the command alone
        prefix = _read_only_mount()
        if prefix is None:   # no namespace here: the check itself, on a folder whose writes fail as they would
            monkeypatch.setattr("tempfile.TemporaryFile", _read_only_file)
            with pytest.raises(ReadOnlyError, match="cannot be written in"):
                check_writable(folder / "syno.db", "the study's database")
            return
        script = (f"mount -t tmpfs -o ro,size=1m none {folder} && cd {folder} && exec \"$@\"")
        line = _refused(folder, "search", "--trials", "1", prefix=(*prefix, "sh", "-c", script, "sh"))
    assert "the study's database (--storage sqlite:///syno.db) cannot be written in" in line, line
    assert str(folder) in line and ("Read-only file system" in line or "Permission denied" in line), line
    assert list(folder.iterdir()) == []


def _read_only_file(*args, **kwargs):  # noqa: ANN002, ANN003 - tempfile.TemporaryFile's
    raise OSError(30, "Read-only file system")


def test_a_read_only_database_file_is_refused(tmp_path):
    path = tmp_path / "syno.db"
    path.write_bytes(b"")
    path.chmod(0o444)
    if os.geteuid() == 0:   # root may write a 0444 file: nothing to refuse, and nothing is
        check_writable(path, "the study's database")
        return
    with pytest.raises(ReadOnlyError, match=f"{path} is read-only"):
        check_writable(path, "the study's database")


@pytest.mark.parametrize("dataset, words", [
    ("mnist", "does not hold mnist: expected train-images-idx3-ubyte"),
    ("cifar10", "does not hold cifar10: expected data_batch_1"),
    ("cifar100", "does not hold cifar100: expected train, test"),
    ("imagenet-folder", "does not hold an ImageNet-style dataset"),
    ("text", "holds no .txt/.md/.py files"),
])
def test_an_empty_data_dir_is_refused_before_the_imports_and_nothing_is_left(tmp_path, dataset, words):
    (tmp_path / "data").mkdir()
    task = ["--task", "lm"] if dataset == "text" else ["--dataset", dataset]
    line = _refused(tmp_path, "search", *task, "--data-dir", "data", "--trials", "1")
    assert words in line and "--data-dir data" in line, line
    assert [p.name for p in tmp_path.iterdir()] == ["data"] and list((tmp_path / "data").iterdir()) == []


def test_the_data_check_reads_what_the_data_modules_read():
    from lightning_modules.data import cifar, image_folder, mnist, text

    assert EXPECTED_FILES["mnist"][1] == mnist.MNIST_FILES
    assert EXPECTED_FILES["cifar10"][:2] == ((cifar.CIFAR10_FOLDER, ""), cifar.CIFAR10_FILES)
    assert EXPECTED_FILES["cifar100"][:2] == ((cifar.CIFAR100_FOLDER, ""), cifar.CIFAR100_FILES)
    assert IMAGE_SUFFIXES == image_folder.IMAGE_SUFFIXES and TEXT_SUFFIXES == text.TEXT_SUFFIXES


def test_data_that_passes_the_check_but_fails_to_load_leaves_no_database(tmp_path, monkeypatch):
    """The MNIST files are there (the light check passes) but hold no IDX data: the data module refuses them after the
    imports, and no syno.db is left (the study's file is made once the data loaded)."""
    from syno_automl.config import SearchConfig
    from syno_automl.errors import SynoError
    from syno_automl.study import run_search

    data = tmp_path / "data"
    data.mkdir()
    for name in EXPECTED_FILES["mnist"][1]:
        (data / name).write_bytes(b"not idx")
    config = SearchConfig(dataset="mnist", data_dir=str(data), trials=1, epochs=1, tracking_uri=None,
                          storage=f"sqlite:///{tmp_path / 'syno.db'}", finalists=0)
    with pytest.raises(SynoError):
        run_search(config, out=None)
    assert not (tmp_path / "syno.db").exists()


@pytest.mark.parametrize("command, words", [
    (("search", "--target", "cuda.eager", "--trials", "1"), "--target cuda.eager: no CUDA device here"),
    (("search", "--target", "cuda.compiled", "--trials", "1"), "--target cuda.compiled: no CUDA device here"),
    (("search", "--latency", "cuda", "--trials", "1"), "--latency cuda: no CUDA device here"),
    (("search", "--accelerator", "gpu", "--trials", "1"), "--accelerator gpu: no GPU here"),
    (("tune", "best", "--target", "cuda"), "--target cuda: no CUDA device here"),
])
def test_cuda_targets_are_refused_without_torch_where_no_cuda_device_can_be(tmp_path, command, words):
    # CUDA_VISIBLE_DEVICES="" hides every GPU, on a machine with one as on one without
    line = _refused(tmp_path, *command, env={"CUDA_VISIBLE_DEVICES": ""})
    assert words in line and "CUDA_VISIBLE_DEVICES=''" in line, line
    assert list(tmp_path.iterdir()) == []


def test_the_light_cuda_check_agrees_with_torch(monkeypatch):
    import torch

    from syno_automl.runtime import cuda_presence

    build = cuda_presence.torch_build()
    assert build is not None and build[0] == torch.__version__ and build[1] == torch.version.cuda
    monkeypatch.delitem(sys.modules, "torch")   # as in a fresh CLI process
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    light = cuda_presence.no_cuda_reason()
    monkeypatch.setitem(sys.modules, "torch", torch)
    if light is not None:   # what the files rule out, torch does not see either
        assert not torch.cuda.is_available(), light
    assert (cuda_presence.no_cuda_reason() is None) == torch.cuda.is_available()   # torch loaded: its answer
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert cuda_presence.no_cuda_reason() == "no CUDA device here (CUDA_VISIBLE_DEVICES='-1' hides every GPU)"
