#!/usr/bin/env bash
# Installs (scripts/install.sh), then runs the C++ tests (ctest) and the Python test suite (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
cmake -S . -B build/ctest -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/ctest >/dev/null
ctest --test-dir build/ctest --output-on-failure
# `pytest` (not `python -m pytest`): the installed package is tested, not the source folder.
pytest -q -p no:cacheprovider "$@"
