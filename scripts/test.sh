#!/usr/bin/env bash
# Installs (scripts/install.sh), then runs the C++ tests (ctest) and the Python test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
cmake -S . -B build/ctest -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/ctest >/dev/null
ctest --test-dir build/ctest --output-on-failure
# From tests/, so that neither pytest nor the subprocesses the tests start (`python -m ...`, isolated TVM
# workers) can import the source folder instead of the installed package (the source has no compiled core).
cd tests
pytest -q -p no:cacheprovider "$@"
