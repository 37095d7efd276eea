#!/usr/bin/env bash
# The checks that need a CUDA GPU, on a host whose python already has torch, lightning, pytest and
# scikit-learn (TVM optional: the TVM parts skip without it). Builds the native module for that python in
# place, then runs the CUDA tests and, with --bench, the CUDA benchmarks.
#
#   bash scripts/gpu_checks.sh [--bench] [--latency-trials N] [--latency-layers 0,1,...]
#
# Output: the test summary, bench/codegen.py --device cuda, bench/latency.py --target cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bench=0
trials=16
layers=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench=1 ;;
    --latency-trials) trials="$2"; shift ;;
    --latency-layers) layers="$2"; shift ;;
    *) echo "gpu_checks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
cmake -S . -B build/gpu -G Ninja -DSKBUILD=ON -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$PY")" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build build/gpu -j "$(nproc)" >/dev/null
cp build/gpu/native/_native*.so syno_automl/
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

(cd tests && "$PY" -m pytest -q -p no:cacheprovider test_cuda.py -rs)

if [[ $bench -eq 1 ]]; then
  "$PY" bench/codegen.py --device cuda --batch 32
  "$PY" bench/latency.py --target cuda --trials "$trials" ${layers:+--layers "$layers"}
fi
