#!/usr/bin/env bash
# Installs (scripts/install.sh), then runs the C++ tests (ctest) and the Python test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
# The C++ tests are built by the install itself, in the editable build's folder, beside the Python module and from
# the same compiled core (SYNO_NATIVE_TESTS=1 asks scripts/install.sh for them): the core is compiled once, on
# both cores, instead of twice side by side.
# SYNO_STATIC_CHECKS=1: the style and type checks (ruff, then mypy: the rules are pyproject.toml's [tool.ruff] and
# [tool.mypy], which also names the files mypy checks) run during the install, beside the C++ build and the
# libraries' first imports, not alone after them; a failure there fails this script
SYNO_NATIVE_TESTS=1 SYNO_STATIC_CHECKS=1 bash scripts/install.sh
. .venv/bin/activate
# Python's bytecode cache on (an environment may turn it off: container images often set PYTHONDONTWRITEBYTECODE):
# without it every test process -- the two workers, the e2e one, each CLI subprocess -- compiles again the few
# thousand modules it imports (torch, Lightning, MLflow: ~10 s of CPU a worker, ~4 s a search subprocess)
unset PYTHONDONTWRITEBYTECODE
native_build=$(ls -d build/cp*/ | head -n 1)
# the C++ tests (one process, ~2 s) run beside the Python ones' start, their output printed after them
ctest --test-dir "$native_build" --output-on-failure >build/ctest.log 2>&1 &
native=$!
# From tests/, as a user's own code would run: the package is found through the editable install's import
# hook (which serves this tree with the core built into .venv), never through the working directory.
# test_e2e_latency.py runs in its own process: MetaSchedule's logging setup (dictConfig on every tuning call)
# breaks on logging state that earlier in-process tests leave behind ('NoneType' object has no attribute
# 'format'); alone it passes. It runs beside the others (it fills the cores while the last files finish), its
# output printed after theirs. Both runs must pass.
# The others: two pytest-xdist workers, one per core (each test trains on one torch thread); --dist loadfile keeps
# a file's tests on one worker, so that a module-scoped fixture (a small study shared by a file's tests) runs once;
# --no-loadscope-reorder hands files out in collection order, which tests/conftest.py makes longest first.
cd tests
pytest -q -p no:cacheprovider measure/test_e2e_latency.py >../build/e2e-latency.log 2>&1 &
e2e=$!
status=0
pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --ignore=measure/test_e2e_latency.py "$@" || status=$?
wait "$e2e" || status=$((status ? status : $?))
wait "$native" || status=$((status ? status : $?))
echo "[test] the C++ tests (ctest):"
cat ../build/ctest.log
echo "[test] measure/test_e2e_latency.py, in its own process:"
cat ../build/e2e-latency.log
exit "$status"
