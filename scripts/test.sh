#!/usr/bin/env bash
# Installs (scripts/install.sh), then runs the C++ tests (ctest) and the Python test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
cmake -S . -B build/ctest -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/ctest >/dev/null
ctest --test-dir build/ctest --output-on-failure
# From tests/, as a user's own code would run: the package is found through the editable install's import
# hook (which serves this tree with the core built into .venv), never through the working directory.
# test_e2e_latency.py runs in its own process: MetaSchedule's logging setup (dictConfig on every tuning call)
# breaks on logging state that earlier in-process tests leave behind ('NoneType' object has no attribute
# 'format'); alone it passes. Both runs must pass.
cd tests
pytest -q -p no:cacheprovider --ignore=test_e2e_latency.py "$@"
pytest -q -p no:cacheprovider test_e2e_latency.py
