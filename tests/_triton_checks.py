"""Checks of the Triton backend that run in a child process (tests/codegen/test_codegen_triton.py starts it).

Why a child: Triton decides at import whether its own library functions (``tl.sum``...) are interpreted or
compiled, so one process cannot both run kernels in the interpreter (``TRITON_INTERPRET=1``) and compile them for a
GPU; and another test may have imported Triton first. Each mode prints one JSON line last.

    python tests/_triton_checks.py interpreted      (with TRITON_INTERPRET=1)
    python tests/_triton_checks.py aot              (without it)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def sample() -> dict:
    """Operators of the default search's space (both mappings) and of two random conv-shaped spaces."""
    from _syno_helpers import random_spec_space
    from triton_agreement import default_space, max_error

    from syno_automl.codegen.triton import triton_support

    spaces = [("default", default_space(), 3), ("conv2d", random_spec_space("conv2d"), 8),
              ("conv1d", random_spec_space("conv1d"), 5)]
    out: dict = {"checked": 0, "supported": 0, "fallbacks": {}, "bad": [], "worst": 0.0}
    for name, space, count in spaces:
        for op in space.sample(count, seed=1):
            for m in range(len(space.mappings)):
                program = op.program(m)
                out["checked"] += 1
                support = triton_support(program)
                if not support.ok:
                    out["fallbacks"][support.code] = out["fallbacks"].get(support.code, 0) + 1
                    continue
                out["supported"] += 1
                err = max_error(program, seed=out["checked"])
                out["worst"] = max(out["worst"], err)
                if not err <= 1e-9:
                    out["bad"].append([name, op.hash, m, err])
    return out


def known_ops() -> dict:
    """conv2d, grouped, depthwise and pointwise (1x1) against F.conv2d: forward and gradients (float64), and
    conv2d on a channels-last input and in float32."""
    import torch
    import torch.nn.functional as F

    from syno_automl import OperatorSpace, known
    from syno_automl.codegen.triton import build_triton_module

    conv = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "g=2: 2"], [{"N": 2, "C_in": 4, "C_out": 6, "H": 7, "W": 5}], max_depth=8)
    wide = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2"], [{"N": 2, "C_in": 16, "C_out": 32, "H": 6, "W": 5}], max_depth=6)
    dw = OperatorSpace("[N, C, H, W]", "[N, C, H, W]", ["N: 0", "C: 3", "H: 2", "W: 2"], ["k=3: 2"],
                       [{"N": 2, "C": 4, "H": 7, "W": 5}], max_depth=6)
    cases = {
        "conv2d": (known.conv2d(conv), (3, 4, 7, 5), lambda x, w: F.conv2d(x, w, padding=1)),
        "conv2d_dot": (known.conv2d(wide), (3, 16, 6, 5), lambda x, w: F.conv2d(x, w, padding=1)),
        "grouped": (known.grouped_conv2d(conv), (3, 4, 7, 5),
                    lambda x, w: F.conv2d(x, w.reshape(6, 2, 3, 3), padding=1, groups=2)),
        "depthwise": (known.depthwise_conv2d(dw), (3, 4, 7, 5),
                      lambda x, w: F.conv2d(x, w.unsqueeze(1), padding=1, groups=4)),
        "pointwise": (known.pointwise_conv1d(wide), (3, 16, 6, 5), lambda x, w: F.conv2d(x, w[:, :, None, None])),
    }
    out: dict = {}
    for name, (op, shape, reference) in cases.items():
        module = build_triton_module(op, 0).double()
        for layout in ("contiguous", "channels_last"):
            x = torch.randn(*shape, dtype=torch.float64)
            if layout == "channels_last":
                x = x.to(memory_format=torch.channels_last)
            x.requires_grad_(True)
            y, y_ref = module(x), reference(x, module.w0)
            g = torch.randn_like(y_ref)
            got = (y.detach(), *torch.autograd.grad(y, [x, module.w0], g))
            want = (y_ref.detach(), *torch.autograd.grad(y_ref, [x, module.w0], g))
            out[f"{name}/{layout}"] = max(float((a - b).abs().max()) for a, b in zip(got, want))
        out[f"{name}/backend"] = module.syno_backend
    module = build_triton_module(known.conv2d(wide), 0)  # float32: the accumulation order differs from conv's
    x = torch.randn(3, 16, 6, 5)
    with torch.no_grad():
        out["conv2d_dot/float32"] = float((module(x) - F.conv2d(x, module.w0, padding=1)).abs().max())
    return out


def aot() -> dict:
    """A handful of kernels compiled for sm_80 and sm_90 (bf16): registers, spills, wgmma."""
    from triton_agreement import resnet_space

    from syno_automl import OperatorSpace, known
    from syno_automl.codegen.triton import triton_support
    from syno_automl.codegen.triton_aot import compile_kernel

    conv = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "g=2: 2"], [{"N": 2, "C_in": 64, "C_out": 64, "H": 32, "W": 32}], max_depth=8)
    dw = OperatorSpace("[N, C, H, W]", "[N, C, H, W]", ["N: 0", "C: 3", "H: 2", "W: 2"], ["k=3: 2"],
                       [{"N": 2, "C": 64, "H": 32, "W": 32}], max_depth=6)
    programs = {"conv2d": known.conv2d(conv).program(0), "grouped": known.grouped_conv2d(conv).program(0),
                "depthwise": known.depthwise_conv2d(dw).program(0)}
    sampled = [op for op in resnet_space(depth=7).sample(12, seed=2) if triton_support(op.program(0)).ok]
    programs.update({f"sampled {op.hash}": op.program(0) for op in sampled[:1]})
    out = {}
    for name, program in programs.items():
        for arch in (80, 90) if name in ("conv2d", "depthwise") else (90,):
            k = compile_kernel(program, arch=arch, dtype="bfloat16")
            out[f"{name}/sm_{arch}"] = {"spills": k.spills, "registers": k.registers, "wgmma": k.wgmma,
                                        "shared": k.shared, "config": k.config}
    return out


def interpreted() -> dict:
    return {"sample": sample(), "known": known_ops()}


if __name__ == "__main__":
    result = {"interpreted": interpreted, "aot": aot}[sys.argv[1]]()
    print(json.dumps(result))
