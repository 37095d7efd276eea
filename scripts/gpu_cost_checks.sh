#!/usr/bin/env bash
# The cost-model part of the GPU check (issue 24 part 5), for scripts/gpu_checks.sh to call: prints
# bench/gpu_cost.py's figures (offline on the shared data, then measured here), then calibrates the cuda.eager and
# cuda.compiled profiles on this GPU (ResNet-18 for CIFAR, the shared data's space). About 4-6 minutes on an H100/H200.
# Without CUDA it says so and exits 0. Profiles land in $OUT (default ./gpu_checks_out).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${OUT:-gpu_checks_out}
mkdir -p "$OUT"
if ! $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "[gpu_cost_checks] no CUDA device (torch.cuda.is_available() is False): skipped"
  exit 0
fi
PYTHONPATH=. $PY bench/gpu_cost.py --offline --gpu --operators 16 --compiled-operators 4
PYTHONPATH=. OUT="$OUT" $PY - <<'PYEOF'
import os, time
import torch
from torch import nn
from lightning_modules import build_model
from syno_automl.calibrate import calibrate
from syno_automl.placeholder import substitute

torch.set_float32_matmul_precision("high")
torch.manual_seed(0)
sub = substitute(build_model("resnet18", 10, 3), nn.Conv2d, torch.randn(128, 3, 32, 32), cost_ratio=None,
                 where=lambda name, m: m.in_channels != 3, flops_ratio=0.5, seed=0)
for target, count in (("cuda.eager", 16), ("cuda.compiled", 4)):
    start = time.time()
    path = os.path.join(os.environ["OUT"], f"{target}.json")
    p = calibrate(sub, target, operators=count, seed=0, out=path)
    print(f"[gpu_cost_checks] {target}: {path} in {time.time() - start:.0f} s: flop {p.flop:.3g} element "
          f"{p.element:.3g} read {p.read:.3g} launch {p.launch:.3g} ns; fit {p.fit}", flush=True)
PYEOF
