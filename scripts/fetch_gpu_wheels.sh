#!/usr/bin/env bash
# Fetches, on a machine with a package index, the wheels scripts/gpu_checks.sh installs on a GPU host that has
# torch but no index: optuna, mlflow and what they need beyond torch, for the GPU host's Python (default 3.12).
#
#   bash scripts/fetch_gpu_wheels.sh [PYTHON_VERSION]      # into .whl/ (git-ignored through .git/info/exclude)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
platforms=()
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do platforms+=(--platform "manylinux_${n}_x86_64"); done
python3 -m pip download -q --only-binary=:all: --python-version "$version" --implementation cp \
  "${platforms[@]}" --platform manylinux2014_x86_64 --platform any -d .whl optuna mlflow
# what the GPU host already has (and must keep its own build of)
rm -f .whl/torch-*.whl .whl/nvidia_*.whl .whl/triton-*.whl
du -sh .whl && ls .whl | wc -l
