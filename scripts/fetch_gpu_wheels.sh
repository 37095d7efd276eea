#!/usr/bin/env bash
# Fetches, on a machine with a package index, the wheels scripts/gpu_checks.sh installs on a GPU host that has
# torch but no index: optuna, mlflow and graphviz at the versions CI tests, for the GPU host's Python (default 3.12),
# with only those of their dependencies that the host lacks. What the host has (scripts/gpu_image_packages.txt:
# torch, numpy, pandas, pyarrow, scipy, scikit-learn, matplotlib...) is not carried: the host keeps its own builds,
# and the device tool carries at most 64 MiB. Also copies the shared H200 data (../shared/data) into shared/data/,
# which travels with the checkout.
#
#   bash scripts/fetch_gpu_wheels.sh [PYTHON_VERSION]      # into .whl/ (git-ignored through .git/info/exclude)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
limit_mb=60  # the device tool's 64 MiB, less the checkout (about 3 MiB)
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
platforms=()
for n in 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do platforms+=(--platform "manylinux_${n}_x86_64"); done
python3 -m pip download -q --only-binary=:all: --python-version "$version" --implementation cp \
  "${platforms[@]}" --platform manylinux2014_x86_64 --platform any -d .whl \
  optuna==5.0.0 mlflow==3.17.2 graphviz==0.21 2>&1 | grep -v "^WARNING: Location" || true
python3 - <<'PY'
import re
from pathlib import Path

def project(name: str) -> str:  # PEP 503 normalized
    return re.sub(r"[-_.]+", "-", name).lower()

lines = Path("scripts/gpu_image_packages.txt").read_text().splitlines()
host = {project(word) for line in lines if not line.startswith("#") for word in line.split()}
for wheel in sorted(Path(".whl").glob("*.whl")):
    if project(wheel.name.split("-")[0]) in host:
        wheel.unlink()
PY
count=$(ls .whl/*.whl | wc -l)
size_mb=$(du -sm .whl | cut -f1)
echo "fetch_gpu_wheels.sh: $count wheels, ${size_mb} MiB in .whl/"
ls .whl
# the shared H200 data bench/gpu_cost.py --offline reads: the device tool sends the checkout (with its shared/
# folder) but not the ../shared beside it
data=../shared/data/gpu_step_times_h200.json
if [[ -f $data ]]; then
  grep -qx '/shared/' .git/info/exclude || echo '/shared/' >> .git/info/exclude
  mkdir -p shared/data && cp "$data" shared/data/
  echo "fetch_gpu_wheels.sh: copied $data into shared/data/"
fi
if (( size_mb > limit_mb )); then
  echo "fetch_gpu_wheels.sh: .whl/ holds ${size_mb} MiB, over the ${limit_mb} MiB the device tool can carry" >&2
  exit 1
fi
