"""scripts/install.sh says what it does before each long, quiet step (issue 34, item 10: it was silent for ~110 s),
and `syno-automl report`'s default output folder is ignored by git at the root only (syno_automl/report/ is code).

The script runs for real against stand-ins for python, pip and id (no download, no root): each records its call in
the same output, so the order of the progress lines and the steps is what a person would see.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _syno_helpers import alive

ROOT = Path(__file__).resolve().parents[2]


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)


def _install_with_stand_ins(tmp_path: Path, pip: str, uv: str = 'echo "RUN uv $*"\n', *, python_fails: str = "",
                            env_extra: dict[str, str] | None = None, stubs_extra: dict[str, str] | None = None,
                            ok: bool = True) -> tuple[Path, list[str]]:
    """scripts/install.sh run in a copy of it against stand-ins; `pip`, `uv`: their stand-ins' scripts;
    `python_fails`: a `python -c` script text on which the python stand-in fails; `stubs_extra`: more stand-ins
    (name: script); `ok`: whether the install must succeed (else fail)."""
    checkout, stubs = tmp_path / "checkout", tmp_path / "stubs"
    (checkout / "scripts").mkdir(parents=True)
    stubs.mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", checkout / "scripts" / "install.sh")
    _stub(stubs / "id", 'echo 1000\n')   # not root: no apt-get
    _stub(stubs / "pip", pip)
    _stub(stubs / "uv", uv)
    # python: `-m venv DIR` makes a venv whose activate puts these stand-ins first; anything else is recorded
    for name, body in (stubs_extra or {}).items():
        _stub(stubs / name, body)
    _stub(stubs / "python", f'''if [ "${{1:-}}" = --version ]; then echo "Python 3.x"; exit 0; fi
echo "RUN python $*"
if [ -n "{python_fails}" ] && [[ "$*" == *"{python_fails}"* ]]; then echo "ImportError: stand-in" >&2; exit 1; fi
if [ "${{1:-}}" = -m ] && [ "${{2:-}}" = venv ]; then
  mkdir -p "$3/bin" && ln -s {stubs}/python "$3/bin/python"
  echo 'export PATH="{stubs}:$PATH"' > "$3/bin/activate"
fi
''')
    env = dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", PYTHON=str(stubs / "python"), **(env_extra or {}))
    done = subprocess.run(["bash", "scripts/install.sh"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return checkout, (done.stdout + done.stderr).splitlines()


def test_every_long_step_is_announced_before_it_runs(tmp_path: Path) -> None:
    checkout, lines = _install_with_stand_ins(tmp_path, 'echo "RUN pip $*"\n')
    runs = [i for i, line in enumerate(lines) if line.startswith("RUN ")]
    assert len(runs) >= 7, lines   # venv, pip, torch, uv, the dependencies, two import checks (the package's pip: its
    # build log, below)
    build_log = (checkout / ".venv" / "install-build.log").read_text()
    assert build_log.startswith("RUN pip install -v --no-compile --no-deps -e .[test,tvm]"), build_log
    assert "RUN uv pip install -q --python .venv/bin/python -r pyproject.toml --extra test --extra tvm" in lines
    for i in runs:   # each step comes after a line saying what it is (with the seconds so far)
        said = next(line for line in reversed(lines[:i]) if not line.startswith("RUN "))
        assert said.startswith("[install] ") and said.endswith(" s)"), (said, lines[i])
    for i in runs:   # the long ones (pip, the venv) right after theirs
        if lines[i].startswith(("RUN pip install", "RUN python -m venv")):
            assert lines[i - 1].startswith("[install] "), (lines[i - 1], lines[i])
    said = "\n".join(lines)
    for words in ("virtual environment .venv (Python 3.x)", "torch 2.13.0", "Lightning, Optuna, MLflow, TVM",
                  "syno_automl (editable; its C++ core", "checking the imports"):
        assert f"[install] {words}" in said, said
    assert lines[-1].startswith("[install] done in ") and "syno-automl search" in lines[-1]


def test_the_venv_gets_its_pip_from_this_pythons_pip_else_from_ensurepip(tmp_path: Path) -> None:
    """No ensurepip pip (unpacked and byte-compiled: seconds before the build can start) where this Python's pip can
    install the newest into the venv; ensurepip's, upgraded, where it cannot."""
    checkout, lines = _install_with_stand_ins(tmp_path, 'echo "RUN pip $*"\n')
    assert "RUN python -m venv .venv --without-pip" in lines, lines
    log = (checkout / ".venv" / "install-pip.log").read_text()
    assert log.startswith("RUN python -m pip --python .venv/bin/python install -q --no-compile -U pip"), log
    assert not any("ensurepip" in line for line in lines), lines
    assert "RUN pip install -q -U pip" not in lines, lines
    checkout, lines = _install_with_stand_ins(tmp_path / "old", 'echo "RUN pip $*"\n', python_fails="-m pip --python")
    said = next(i for i, line in enumerate(lines) if "cannot install into .venv" in line)
    assert lines[said + 1:said + 3] == ["RUN python -m ensurepip", "RUN pip install -q -U pip"], lines


@pytest.mark.parametrize("pip, uv, said", [
    ('echo "RUN pip $*"; [[ " $* " != *" uv "* ]]', 'echo "RUN uv $*"', "uv could not be installed"),
    ('echo "RUN pip $*"', 'echo "RUN uv $*"; exit 1', "uv failed (above)"),
])
def test_without_uv_pip_installs_the_dependencies(tmp_path: Path, pip: str, uv: str, said: str) -> None:
    """uv is a speed-up, not a requirement: where it cannot be installed or fails, pip installs what uv would
    have."""
    _, lines = _install_with_stand_ins(tmp_path, pip + "\n", uv + "\n")
    assert f"[install] {said}: pip installs them (a minute)" in lines, lines
    ran_uv = [line for line in lines if line.startswith("RUN uv pip install ")]
    assert len(ran_uv) == (0 if said == "uv could not be installed" else 1), lines
    assert any(line.startswith("RUN pip install -q --no-compile -r ") for line in lines), lines  # pyproject's lists
    assert lines[-1].startswith("[install] done in ")


def test_the_default_report_folder_is_ignored_at_the_root_only() -> None:
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT).returncode == 0

    assert ignored("report/report.md") and ignored("report/final.png")   # `syno-automl report` (--out report)
    assert not ignored("syno_automl/report/final.py") and not ignored("syno_automl/report/__init__.py")
    from syno_automl.cli import build_parser

    assert build_parser().parse_args(["report"]).out == "report"


@pytest.mark.parametrize("library", ["torch", "optuna, mlflow", "lightning, torchmetrics"])
def test_a_library_that_does_not_import_fails_the_install(tmp_path: Path, library: str) -> None:
    """Each of the import checks, which run beside the build in processes of their own."""
    _, lines = _install_with_stand_ins(tmp_path, 'echo "RUN pip $*"\n', python_fails=f"import {library}", ok=False)
    assert "[install] failed: the libraries do not import (above)" in lines, lines
    assert "ImportError: stand-in" in lines, lines


@pytest.mark.parametrize("failing", ["", "ruff", "mypy"])
def test_the_static_checks_run_beside_the_build_and_a_failure_fails_the_install(tmp_path: Path,
                                                                                failing: str) -> None:
    stubs = {name: f'echo "RUN {name} $*"\n' + ("echo 'found: one'; exit 1\n" if name == failing else "")
             for name in ("ruff", "mypy")}
    _, lines = _install_with_stand_ins(tmp_path, 'echo "RUN pip $*"\n', env_extra={"SYNO_STATIC_CHECKS": "1"},
                                       stubs_extra=stubs, ok=not failing)
    assert "RUN ruff check ." in lines, lines
    assert any(line.startswith("RUN mypy") for line in lines) == (failing != "ruff"), lines   # not after ruff fails
    assert any(line.startswith("[install] style and type checks (ruff, mypy), run beside the build (")
               for line in lines), lines
    if failing:
        assert "found: one" in lines and "[install] failed: the style or type checks (above)" in lines, lines
    else:
        assert lines[-1].startswith("[install] done in "), lines


def test_a_failed_cpp_build_fails_the_install_with_its_log(tmp_path: Path) -> None:
    pip = 'echo "RUN pip $*"\nif [[ "$*" == *"-e .[test,tvm]"* ]]; then echo "error: a compiler stand-in"; exit 1; fi\n'
    _, lines = _install_with_stand_ins(tmp_path, pip, ok=False)
    assert "error: a compiler stand-in" in lines, lines   # the build log's tail
    assert "[install] failed: pip's whole output is in .venv/install-build.log" in lines, lines


def test_a_step_that_fails_while_the_build_runs_stops_the_build(tmp_path: Path) -> None:
    """The C++ build runs beside the downloads: when one of them fails, the build is stopped, not left running
    (writing into build/ and .venv after the install has failed). The build's stand-in would run for minutes; the
    torch download's fails once the build has started."""
    started = tmp_path / "build.pid"
    pip = f'''echo "RUN pip $*"
if [[ "$*" == *"-e .[test,tvm]"* ]]; then echo $$ > {started}.tmp && mv {started}.tmp {started}; exec sleep 300; fi
if [[ "$*" == *"torch=="* ]]; then
  while [ ! -s {started} ]; do sleep 0.05; done
  echo "ERROR: a download stand-in" >&2; exit 1
fi
'''
    _, lines = _install_with_stand_ins(tmp_path, pip, ok=False)   # returns: nothing holds its output open
    assert "ERROR: a download stand-in" in lines, lines
    assert not alive(int(started.read_text())), "the build's stand-in still runs"
