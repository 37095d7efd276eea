"""The installed package imports from the repository root too (issue 12: the source folder shadowed a plain
install there, and `import syno_automl` failed with "No module named 'syno_automl._native'").

scripts/install.sh installs editable (scikit-build-core's redirect mode), so the root's `syno_automl/` folder
is the installed package's code and the compiled core comes from the environment.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import syno_automl

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import syno_automl, syno_automl._native as n; print(syno_automl.__file__); print(n.__file__)"


def _import_from(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=dict(os.environ), capture_output=True,
                          text=True, timeout=120)


def test_import_works_from_the_repository_root_and_is_the_same_package(tmp_path: Path) -> None:
    here = Path(syno_automl.__file__).resolve()
    from_root = _import_from(ROOT)
    assert from_root.returncode == 0, from_root.stderr[-2000:]
    elsewhere = _import_from(tmp_path)
    assert elsewhere.returncode == 0, elsewhere.stderr[-2000:]
    # the root's import is this checkout's package, the same one the tests (run from tests/) exercise
    assert Path(from_root.stdout.splitlines()[0]).resolve() == ROOT / "syno_automl" / "__init__.py"
    assert Path(elsewhere.stdout.splitlines()[0]).resolve() == here


def test_a_source_tree_without_its_core_says_what_to_do(tmp_path: Path) -> None:
    """A copy of the sources with no compiled core and no install behind it fails with the one-line advice."""
    import shutil

    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "syno_automl", copy / "syno_automl",
                    ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    # -I -S: no PYTHONPATH, no site-packages (nor an editable install's finder), only the copy on the path
    out = subprocess.run([sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, '.'); import syno_automl"],
                         cwd=copy, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: syno_automl's C++ core") and "pip install -e ." in last, out.stderr[-2000:]
