#!/usr/bin/env bash
# For speed on a GPU (issue 45) the prepared script is bench/gpu_window.py, not this one: standalone (torch and
# Triton only, the operators exported ahead of time into bench/gpu_window_ops/ by `python bench/gpu_window.py
# --prepare bench/gpu_window_ops`), each step capped, JSON lines in $OUT/window.jsonl as they land, the Inductor
# and Triton caches packed into $OUT/cache.tar.gz[.partN]. Its device-tool call (bench/ travels as tracked files):
#   echo /.gpu_cache/ >> .git/info/exclude; mkdir -p .gpu_cache   # once; after a window, copy its cache.tar.gz* here
#   run(command="PYTHONUNBUFFERED=1 python3 bench/gpu_window.py --out $OUT --cache .gpu_cache", carry=[".gpu_cache"],
#       timeout_s=590)        # steps' caps 540 s in all; a rerun of some: add --steps cifar32,train --cap-scale 0.5
# CI runs its `--dry-run` (tests/bench/test_gpu_window.py). What follows is the older check of the CUDA tests and a search.
#
# The checks that need a CUDA GPU (issues 24 part 5 and 35) on an H100/H200, on a host whose python
# already has torch (lightning, scikit-learn, pytest and scipy are usual there too):
#   1. installs what the host lacks (optuna, mlflow and their dependencies) from wheels in .whl/ beside the
#      checkout, when present (fetch them on a machine with an index: bash scripts/fetch_gpu_wheels.sh);
#   2. builds the native module for that python, in place;
#   3. the CUDA tests (tests/measure/test_cuda.py: generated modules and TVM kernels against the CPU, latency with TVM and
#      TorchInductor, training on the GPU; TVM's parts skip cleanly without TVM);
#   4. a short search end to end on the GPU: ResNet-18 on the digits upscaled to 32x32, batch 128 (at 64 the
#      cuda.compiled budget holds next to no operator: a launch weighs more), --accelerator gpu, 6 epochs (at 2 the
#      baseline stayed at chance: 22 steps), cost profile and speed target cuda.compiled (each trial measured on
#      it); the verdict names its target. First run on an H200 (2026-11-27): every trial failed until the example
#      batch and SlowTrialGuard's baseline went where the weights are (tests/measure/test_cuda.py covers both now);
#   5. the cost model (scripts/gpu_cost_checks.sh): bench/gpu_cost.py (per target: Spearman of the predicted cost
#      with the measured time, step-time ratios inside the budget), then calibrate on cuda (cuda.eager and
#      cuda.compiled profiles of that space);
#   6. the speed protocol's reliability (bench/speed_reliability.py: each operator measured twice, each time in 2
#      fresh processes pooled as the final stage does) on cuda.eager fp32, cuda.compiled, cuda.eager bf16.
#
# Times on an H200 (2026-11-27, docs/measurements/2026-11-27-h200.md): machine start ~50 s, install and build 20 s,
# tests 40 s, search 130 s, reliability on cuda.eager ~110 s per precision, cuda.compiled over 200 s. The whole
# does not fit one 15-minute device session with a rerun: --steps picks (tests,search,cost,reliability; all by
# default), e.g. a first call with --steps tests,search,cost and a second with --steps reliability.
#
# Each step's output lands in $OUT as it runs (tests.log, search.log, reliability.log, gpu_cost.log), so a run cut short by the
# device's time limit still brings back what it finished.
#
#   bash scripts/gpu_checks.sh [--steps tests,search,cost,reliability] [--bench] [--latency-trials N] [--latency-layers 0,1,...]
#
# Through the device tool: `bash scripts/fetch_gpu_wheels.sh` here (wheels into .whl/, the shared H200 data into
# shared/), then run(command="bash scripts/gpu_checks.sh", carry=[".whl", "shared"], timeout_s=560), then give_back.
#
# Figures land in $OUT (default ./gpu_checks_out). --bench adds bench/codegen.py and bench/latency.py on cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu_checks_out}
mkdir -p "$OUT"
bench=0
trials=16
layers=""
steps="tests,search,cost,reliability"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench=1 ;;
    --steps) steps="$2"; shift ;;
    --latency-trials) trials="$2"; shift ;;
    --latency-layers) layers="$2"; shift ;;
    *) echo "gpu_checks.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
for name in ${steps//,/ }; do
  case "$name" in tests|search|cost|reliability) ;; *) echo "gpu_checks.sh: unknown step $name (tests, search, cost, reliability)" >&2; exit 2 ;; esac
done
wanted() { [[ ",$steps," == *",$1,"* ]]; }
step() { echo "[gpu_checks $(date +%H:%M:%S)] $*"; }
failed=()  # a failing step is reported and the next ones still run: every figure the run can give comes back

"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
if ls .whl/*.whl >/dev/null 2>&1; then
  step "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into /tmp/site"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$PY" -c "import optuna, mlflow" 2>/dev/null; then
  echo "gpu_checks.sh: optuna and mlflow are missing on this host: fetch their wheels into .whl/ with" >&2
  echo "  bash scripts/fetch_gpu_wheels.sh   (on a machine with a package index), then run this again" >&2
  exit 2
fi

step "building the native module"
cmake -S . -B build/gpu -G Ninja -DSKBUILD=ON -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$PY")" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build build/gpu -j "$(nproc)" >/dev/null
cp build/gpu/native/_native*.so syno_automl/
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if wanted tests; then
  step "CUDA tests"
  (cd tests && "$PY" -m pytest -q -p no:cacheprovider test_cuda.py test_accelerator.py -rs) 2>&1 | tee "$OUT/tests.log" \
    || failed+=("CUDA tests (tests.log)")
fi

if wanted search; then
  step "a short search on the GPU (ResNet-18, digits at 32x32, target cuda.compiled)"
  rm -rf "$OUT/search" && mkdir -p "$OUT/search"
  (cd "$OUT/search" && "$PY" -m syno_automl.cli search --model resnet18 --image-size 32 --batch-size 128 --accelerator gpu \
     --precision bf16-mixed --cost-profile cuda.compiled --target cuda.compiled --trials 6 --epochs 6 \
     --final-epochs 8 --finalists 2 --final-seeds 1 --timeout 0) 2>&1 | tee "$OUT/search.log" \
    || failed+=("search (search.log)")
  if tail -n 1 "$OUT/search.log" | grep -q "cuda.compiled"; then  # the verdict, its last line
    step "the verdict names its target"
  else
    failed+=("the search's verdict does not name cuda.compiled (search.log)")
  fi
fi

if wanted cost; then
  step "the cost model on this GPU: bench/gpu_cost.py (the acceptance figures), then calibrate cuda.eager and cuda.compiled"
  OUT="$OUT" PYTHON="$PY" bash scripts/gpu_cost_checks.sh 2>&1 | tee "$OUT/gpu_cost.log" || failed+=("cost model (gpu_cost.log)")
fi

if wanted reliability; then
  step "the speed protocol's reliability on this GPU (issue 32): each operator measured twice, each time in 2 fresh processes"
  for spec in "cuda.eager 32 8 6" "cuda.compiled 32 3 2" "cuda.eager bf16-mixed 8 6"; do
    read -r target precision dops rops <<<"$spec"
    "$PY" bench/speed_reliability.py --target "$target" --precision "$precision" --default-ops "$dops" \
      --resnet-ops "$rops" --no-load --save "$OUT/reliability-$target-$precision.json" 2>&1 \
      | tee -a "$OUT/reliability.log" || failed+=("reliability $target $precision (reliability.log)")
  done
fi

if [[ $bench -eq 1 ]]; then
  "$PY" bench/codegen.py --device cuda --batch 32
  "$PY" bench/latency.py --target cuda --trials "$trials" ${layers:+--layers "$layers"}
fi
if (( ${#failed[@]} )); then
  step "done, with failures: ${failed[*]}"
  exit 1
fi
step "done"
