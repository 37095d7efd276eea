"""The Triton backend against the torch lowering, in Triton's interpreter on the CPU (issue 45, item 1).

Over operators sampled from two spaces -- the default search's (``pointwise_cnn`` on 8x8 digits, FLOPs budget
0.5x, cost budget and priors on; each of its 2 mappings) and a ResNet-CIFAR 3x3 layer's (64 -> 64 channels,
32x32, coefficients k=3 and s=2, depth 8, FLOPs at most the conv's, the default priors) -- it counts the
operators the backend runs as one kernel (by tiling: tl.dot, broadcast, row sum) and those that fall back (by
reason), and checks each supported one: forward and the gradients of x and w0 (torch autograd through the
kernel's Function) against the torch lowering with the same weights, in float64 at batch 2, agreeing when
every max |difference| <= 1e-9 · (1 + max |reference|). Prints one table per space and the wall time.

    python bench/triton_agreement.py                  # 120 operators of each space, seed 0
    python bench/triton_agreement.py --count 20 --spaces default
    python bench/triton_agreement.py --aot --count 20   # instead: compile each supported kernel for sm_90, bf16

``--aot`` compiles (no interpreter: one process cannot do both) the first autotune config of every supported
program for ``GPUTarget("cuda", 90, 32)`` and counts failures, kernels that spill and kernels using wgmma.
"""
from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from syno_automl import OperatorSpace, priors  # noqa: E402
from syno_automl.codegen.torch import build_module  # noqa: E402
from syno_automl.codegen.triton import build_triton_module, triton_support  # noqa: E402

RTOL = 1e-9


def default_space() -> OperatorSpace:
    """The default search's space (as tests/placeholder/test_channels_last.py builds it)."""
    from lightning_modules import build_model
    from syno_automl.placeholder import substitute

    torch.manual_seed(0)
    x = torch.randn(2, 1, 8, 8)
    return substitute(build_model("pointwise_cnn", 10, 1), nn.Conv2d, x, flops_ratio=0.5, seed=0).space


def resnet_space(channels: int = 64, size: int = 32, depth: int = 8) -> OperatorSpace:
    """One ResNet-CIFAR 3x3 conv layer's space: FLOPs at most the conv's, the default priors."""
    mapping = {"N": 2, "C_in": channels, "C_out": channels, "H": size, "W": size}
    conv_flops = 2 * 2 * channels * channels * 9 * size * size
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "s=2: 2"], [mapping], max_depth=depth, max_flops=conv_flops,
                         **priors.prior_options(True, channel_input=1, widest_output=channels))


def input_for(program: dict[str, Any], batch: int = 2, dtype=torch.float64) -> torch.Tensor:
    shape = [batch if d in program.get("free_dims", ()) else s
             for d, s in zip(program["input"]["dims"], program["input"]["shape"])]
    return torch.randn(*shape, dtype=dtype)


def max_error(program: dict[str, Any], seed: int = 0, batch: int = 2) -> float:
    """max over (out, dx, dw0) of max|triton - torch| / (1 + max|torch|), float64."""
    torch.manual_seed(seed)
    ref = build_module(program).double()
    tri = build_triton_module(program).double()
    tri.load_state_dict(ref.state_dict())
    x = input_for(program, batch).requires_grad_(True)
    y, y_ref = tri(x), ref(x)
    g = torch.randn_like(y_ref)
    got = (y.detach(), *torch.autograd.grad(y, [x, tri.w0], g))
    want = (y_ref.detach(), *torch.autograd.grad(y_ref, [x, ref.w0], g))
    return max(float((a - b).abs().max()) / (1.0 + float(b.abs().max())) for a, b in zip(got, want))


def tiling(program: dict[str, Any]) -> str:
    plan = triton_support(program).plan
    assert plan is not None
    return "row-sum" if plan.rowsum else "dot" if plan.dot else "broadcast"


def survey(space: OperatorSpace, count: int, seed: int, batch: int = 2, progress: bool = False) -> dict[str, Any]:
    """Counts over ``count`` sampled operators, every mapping each."""
    ops = space.sample(count, seed=seed)
    tally: collections.Counter[str] = collections.Counter()
    bad: list[tuple[str, int, float]] = []
    worst = 0.0
    for op in ops:
        for m in range(len(space.mappings)):
            program = op.program(m)
            support = triton_support(program)
            if not support.ok:
                tally["fallback: " + support.code] += 1
                continue
            tally["supported"] += 1
            tally["  " + tiling(program)] += 1
            t0 = time.time()
            err = max_error(program, batch=batch)
            if progress:
                print(f"    {op.hash} mapping {m}: {tiling(program)} {err:.1e} {time.time() - t0:.1f} s",
                      file=sys.stderr, flush=True)
            worst = max(worst, err)
            if err <= RTOL and math.isfinite(err):
                tally["agree"] += 1
            else:
                tally["disagree"] += 1
                bad.append((op.hash, m, err))
    return {"operators": len(ops), "programs": sum(len(space.mappings) for _ in ops), "tally": tally,
            "worst": worst, "bad": bad}


def aot_survey(space: OperatorSpace, count: int, seed: int, arch: int = 90) -> dict[str, Any]:
    """Compile every supported program of ``count`` sampled operators for sm_<arch> (bf16, first config)."""
    from syno_automl.codegen.triton_aot import compile_kernel

    tally: collections.Counter[str] = collections.Counter()
    failed: list[tuple[str, int, str]] = []
    for op in space.sample(count, seed=seed):
        for m in range(len(space.mappings)):
            program = op.program(m)
            if not triton_support(program).ok:
                continue
            tally["supported"] += 1
            try:
                k = compile_kernel(program, arch=arch, dtype="bfloat16")
            except Exception as e:  # noqa: BLE001 - a survey: every failure is counted and shown, none stops it
                tally["failed"] += 1
                failed.append((op.hash, m, str(e).splitlines()[-1][:200]))
                continue
            tally["compiled"] += 1
            tally["  spilling"] += k.spills > 0
            tally["  wgmma"] += k.wgmma
    return {"tally": tally, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=120, help="operators sampled per space")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spaces", default="default,resnet", help="comma list of: default, resnet")
    ap.add_argument("--batch", type=int, default=2, help="the batch of the inputs checked")
    ap.add_argument("--progress", action="store_true", help="one line per checked program on stderr")
    ap.add_argument("--aot", action="store_true", help="compile each supported kernel for sm_90 instead")
    args = ap.parse_args(argv)
    if args.aot:
        return _aot_main(args)
    # before Triton is imported (by the first generated module): kernels run in its interpreter, on the CPU
    os.environ["TRITON_INTERPRET"] = "1"
    builders = {"default": default_space, "resnet": resnet_space}
    started = time.time()
    disagreements = 0
    for name in args.spaces.split(","):
        t0 = time.time()
        space = builders[name]()
        result = survey(space, args.count, args.seed, args.batch, args.progress)
        print(f"\n{name}: {result['operators']} operators, {result['programs']} programs "
              f"({time.time() - t0:.0f} s)")
        for key in sorted(result["tally"], key=lambda k: (k.startswith("fallback"), k)):
            print(f"  {key:<28} {result['tally'][key]:>5}")
        print(f"  worst relative error         {result['worst']:.2e}  (tolerance {RTOL:g})")
        for h, m, err in result["bad"]:
            print(f"  DISAGREES: {h} mapping {m}: {err:.3e}")
        disagreements += len(result["bad"])
    print(f"\nwall time {time.time() - started:.0f} s; disagreements {disagreements}")
    return 1 if disagreements else 0


def _aot_main(args: argparse.Namespace) -> int:
    started = time.time()
    builders = {"default": default_space, "resnet": resnet_space}
    failures = 0
    for name in args.spaces.split(","):
        result = aot_survey(builders[name](), args.count, args.seed)
        print(f"\n{name}: sm_90, bf16, first autotune config")
        for key in sorted(result["tally"]):
            print(f"  {key:<28} {result['tally'][key]:>5}")
        for h, m, err in result["failed"]:
            print(f"  FAILED: {h} mapping {m}: {err}")
        failures += len(result["failed"])
    print(f"\nwall time {time.time() - started:.0f} s; failures {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
