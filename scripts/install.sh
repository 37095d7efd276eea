#!/usr/bin/env bash
# Installs syno_automl and everything it needs into ./.venv (CPU torch first, so that nothing pulls a CUDA
# build), plus the Debian packages the artifacts and tests use (Graphviz, PostgreSQL, and headless Chromium for
# tests/cli/test_ui_docs.py, the MLflow UI against docs/search.md) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# the same interpreter once the venv is active (its python3 first on PATH): pip is installed into the venv from it
PYTHON=$(command -v "$PYTHON" || echo "$PYTHON")
export PIP_DISABLE_PIP_VERSION_CHECK=1
TORCH=2.13.0
# each step says what it does before its (quiet) command runs, with the seconds since the start: minutes in all
step() { echo "[install] $* (${SECONDS} s)"; }

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=""
  command -v dot >/dev/null || missing="$missing graphviz"
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
  command -v chromium >/dev/null || browser=chromium
  if [ -n "$missing" ] || [ -n "${browser:-}" ]; then
    step "Debian packages:$missing ${browser:-} (apt-get)"
    apt-get update -qq >/dev/null
    [ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    # no recommends: Chromium's pull in ~90 desktop packages (~60 MB) the headless browser does not need
    [ -z "${browser:-}" ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
fi

if [ ! -x .venv/bin/python ]; then
  step "virtual environment .venv ($("$PYTHON" --version 2>&1))"
  # without ensurepip's pip, which it unpacks and byte-compiles (~6 s before any other step can start): this
  # Python's own pip installs the newest one into it below (pip >= 22.3: --python), ensurepip where it cannot
  "$PYTHON" -m venv .venv --without-pip
fi
. .venv/bin/activate
quiet() { "$@" 2>&1 | { grep -v "is ignored" || true; }; }   # a pip failure still fails (pipefail)
step "pip, upgraded"
if [ -x .venv/bin/pip ]; then
  quiet pip install -q -U pip
elif ! "$PYTHON" -m pip --python .venv/bin/python install -q --no-compile -U pip >.venv/install-pip.log 2>&1; then
  echo "[install] $PYTHON's pip cannot install into .venv (.venv/install-pip.log): ensurepip's, upgraded"
  quiet python -m ensurepip | tail -n 1
  quiet pip install -q -U pip
fi
# What runs beside a step (the C++ build, the import check, the static checks) is stopped with its children when a
# step fails first: a build left running would go on writing into build/ and .venv.
beside=()
stop_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do stop_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'code=$?; if [ "$code" != 0 ]; then for pid in "${beside[@]}"; do stop_tree "$pid"; done; fi; exit "$code"' EXIT

# editable (scikit-build-core's redirect mode): the C++ core is built into .venv and the Python code is served
# from this checkout, so `import syno_automl` works from the repository root too (a plain install is shadowed
# there by the source folder, which has no compiled core). Re-run after changing C++ code.
# It starts first and builds beside the downloads: its build needs only scikit-build-core and pybind11 (pip fetches
# them into an isolated environment), not torch nor the other dependencies, which download and unpack on about one
# core (~15 s); the import checks and the static checks join it as those come in.
step "syno_automl (editable; its C++ core compiled), beside the next steps"
# SYNO_NATIVE_TESTS=1 (scripts/test.sh): the C++ unit tests are built too, in the same build folder (ctest there)
native_tests=()
[ -z "${SYNO_NATIVE_TESTS:-}" ] || native_tests=(--config-settings=cmake.define.SYNO_BUILD_TESTS=ON)
# the C++ core compiles for a minute: ninja's progress lines ("[12/73] Building CXX object .../size.cpp.o", in pip's
# verbose output) are shown as they come, one short line each; the rest of that output goes to a log, whose tail is
# printed if the install fails
build_log=.venv/install-build.log
build_progress() {
  { grep --line-buffered -E '^\s*\[[0-9]+/[0-9]+\] (Building|Linking) ' || true; } |
    sed -u -E 's#^\s*\[([0-9]+/[0-9]+)\] (Building|Linking) [A-Za-z+]+ [a-z ]*(object|library|module|executable) (.*/)?([^/ ]+)$#[install]   C++ core \1: \5#'
}
(pip install -v --no-compile --no-deps -e ".[test,tvm]" "${native_tests[@]}" 2>&1 | tee "$build_log" | build_progress) &
build=$!
beside+=("$build")

# --no-compile: no byte-compiling of the ~17,000 modules installed (~40 s of CPU); Python compiles the few hundred
# that are imported, once, on first import
step "torch $TORCH, first (the largest download), so that nothing else pulls another build"
quiet pip install -q --no-compile "torch==$TORCH"
# the dependencies (Lightning, Optuna, MLflow, TVM, the test tools: pyproject.toml's, torch kept as installed) by uv,
# which downloads and unpacks them in parallel: ~17 s where pip took ~54 s (warm caches both); by pip (a minute)
# where uv cannot be had or fails.
step "Lightning, Optuna, MLflow, TVM and the test tools (uv, from pyproject.toml)"
dependencies_by_pip() {
  echo "[install] $1: pip installs them (a minute)"
  quiet pip install -q --no-compile -r <(python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["test"] + p["optional-dependencies"]["tvm"]))')
}
if ! { quiet pip install -q uv && command -v uv >/dev/null; }; then
  dependencies_by_pip "uv could not be installed"
elif ! uv pip install -q --python .venv/bin/python -r pyproject.toml --extra test --extra tvm; then
  dependencies_by_pip "uv failed (above)"
fi
# The libraries' first import compiles their bytecode (--no-compile: only what is imported; ~35 s of CPU in all).
# The bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set in many container
# images): else every later process (each test worker, each search) compiles the same modules again. The imports
# run beside the build once the downloads are in (not racing uv's unpacking), in processes of their own (one
# process importing them all in turn ran alone on one core for ~20 s after the build), their output shown after it.
imports=()   # "pid log" of each
import_beside() {   # $1: an import list, $2: the name of its log
  local log=".venv/install-imports-$2.log"
  (unset PYTHONDONTWRITEBYTECODE; python -c "import $1") >"$log" 2>&1 &
  imports+=("$! $log")
  beside+=("$!")
}
imports_failed() {   # $1: the log of the import that failed
  cat "$1" >&2
  echo "[install] failed: the libraries do not import (above)" >&2
  exit 1
}
import_beside "torch; print('[install] ok: torch', torch.__version__)" torch
torch_import=$!
# with the tracking store every search opens (MLflow's SQL store: SQLAlchemy, Alembic)
import_beside "optuna, mlflow, mlflow.store.tracking.sqlalchemy_store" mlflow
# what torchmetrics imports at its own import when they are installed (SciPy's signal processing, matplotlib's
# pyplot: ~40 % of the Lightning import's CPU), compiled beside torch's, not after it
import_beside "scipy.signal, matplotlib.pyplot" scipy
# TVM too, when it imports (the tvm extra; its absence is the latency commands' message, not the install's)
(unset PYTHONDONTWRITEBYTECODE; python -c "import tvm" >/dev/null 2>&1 || true) &
tvm_import=$!
beside+=("$tvm_import")
# SYNO_STATIC_CHECKS=1 (scripts/test.sh): the style and type checks (ruff, mypy: pyproject.toml's rules; they read
# the source, not the build) run beside the build too, their output shown after it; a failure fails the install
checks_log=.venv/install-checks.log
checks=
if [ -n "${SYNO_STATIC_CHECKS:-}" ]; then
  { ruff check . && mypy; } >"$checks_log" 2>&1 &
  checks=$!
  beside+=("$checks")
fi
# Lightning and torchmetrics import torch: once its bytecode is written (not compiled twice at once)
wait "$torch_import" || imports_failed .venv/install-imports-torch.log
imports=("${imports[@]:1}")   # torch's, waited for (a second wait would not find it)
import_beside "lightning, torchmetrics" lightning
step "waiting for the C++ build"
if ! wait "$build"; then
  tail -n 40 "$build_log" >&2
  echo "[install] failed: pip's whole output is in $build_log" >&2
  exit 1
fi
# Once the build is done, on the core it leaves: this package's own modules (served from this checkout) and the test
# tools (the test extra), else compiled again by each of the test command's first processes, which start together
import_beside "pytest, xdist, hypothesis, compileall, sys; sys.exit(not all([compileall.compile_dir(d, quiet=1) for d in ('syno_automl', 'lightning_modules')]))" package
step "checking the imports"
cat .venv/install-imports-torch.log
for pid_log in "${imports[@]}"; do
  wait "${pid_log%% *}" || imports_failed "${pid_log#* }"
  cat "${pid_log#* }"
done
wait "$tvm_import"
if [ -n "$checks" ]; then
  step "style and type checks (ruff, mypy), run beside the build"
  checked=0
  wait "$checks" || checked=$?
  cat "$checks_log"
  if [ "$checked" != 0 ]; then
    echo "[install] failed: the style or type checks (above)" >&2
    exit 1
  fi
fi
python -c "import syno_automl._native, torch"   # the core beside torch, in one process
(cd / && python -c "import syno_automl._native")
echo "[install] done in ${SECONDS} s: . .venv/bin/activate, then syno-automl search"
