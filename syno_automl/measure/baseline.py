"""Baselines: the layer an operator replaces, as a TE kernel (for TVM) and as a torch module (eager/Inductor).

:func:`infer_baseline` reads it off the program's shapes: conv2d NCHW for ``[N, C_in, H, W] -> [N, C_out, H', W']``,
dense for ``[N, C_in] -> [N, C_out]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from syno_automl.errors import OptionError

__all__ = ["conv2d_nchw_te", "dense_te", "infer_baseline", "baseline_kernel", "baseline_module", "describe",
           "is_kernel"]


def conv2d_nchw_te(N, C_in, C_out, H, W, k, stride=1, groups=1, dtype="float32"):
    """PrimFunc ``main(x[N,C_in,H,W], w[C_out,C_in/groups,k,k], out)``: conv2d NCHW, zero padding k//2
    ("same" for stride 1, like the UNFOLD primitive), no bias."""
    from tvm import te, tirx

    if C_in % groups or C_out % groups:
        raise OptionError(f"groups={groups} must divide C_in={C_in} and C_out={C_out}")
    cig, cog = C_in // groups, C_out // groups
    pad = k // 2
    Ho, Wo = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    x = te.placeholder((N, C_in, H, W), dtype, name="x")
    w = te.placeholder((C_out, cig, k, k), dtype, name="w")
    xp = te.compute(
        (N, C_in, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, v: tirx.if_then_else(
            tirx.all(h >= pad, h < H + pad, v >= pad, v < W + pad), x[n, c, h - pad, v - pad], tirx.const(0, dtype)
        ),
        name="pad",
    )
    rc = te.reduce_axis((0, cig), name="rc")
    ry = te.reduce_axis((0, k), name="ry")
    rx = te.reduce_axis((0, k), name="rx")
    out = te.compute(
        (N, C_out, Ho, Wo),
        lambda n, o, i, j: te.sum(
            xp[n, tirx.floordiv(o, cog) * cig + rc, i * stride + ry, j * stride + rx] * w[o, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv2d",
    )
    return te.create_prim_func([x, w, out]).with_attr("global_symbol", "main")


def dense_te(N, C_in, C_out, dtype="float32"):
    """PrimFunc ``main(x[N,C_in], w[C_out,C_in], out[N,C_out])``: ``out = x @ w.T`` (torch Linear, no bias)."""
    from tvm import te

    x = te.placeholder((N, C_in), dtype, name="x")
    w = te.placeholder((C_out, C_in), dtype, name="w")
    r = te.reduce_axis((0, C_in), name="r")
    out = te.compute((N, C_out), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="dense")
    return te.create_prim_func([x, w, out]).with_attr("global_symbol", "main")


def infer_baseline(program: Mapping[str, Any], kernel_size: int | None = None) -> dict[str, Any] | None:
    """The layer an operator of this program's shapes replaces, or None when there is no obvious one.

    * ``[N, C_in, H, W] -> [N, C_out, H', W']`` with ``H' = ceil(H / s)``, ``W' = ceil(W / s)`` (same ``s``):
      conv2d NCHW, ``k x k`` (``kernel_size``, default 3), zero padding ``k // 2``, stride ``s``, no bias;
    * ``[N, C_in] -> [N, C_out]``: dense (``x @ w.T``, torch's Linear without bias).

    Returns ``{"kind": "conv2d", "N":, "C_in":, "C_out":, "H":, "W":, "k":, "stride":}`` or
    ``{"kind": "dense", "N":, "C_in":, "C_out":}``."""
    i, o = [int(v) for v in program["input"]["shape"]], [int(v) for v in program["output"]["shape"]]
    if len(i) == 4 and len(o) == 4 and i[0] == o[0]:
        N, C_in, H, W = i
        _, C_out, Ho, Wo = o
        k = int(kernel_size or 3)
        for s in range(1, max(H, W) + 1):
            if -(-H // s) == Ho and -(-W // s) == Wo:
                return {"kind": "conv2d", "N": N, "C_in": C_in, "C_out": C_out, "H": H, "W": W, "k": k, "stride": s}
        return None
    if len(i) == 2 and len(o) == 2 and i[0] == o[0]:
        return {"kind": "dense", "N": i[0], "C_in": i[1], "C_out": o[1]}
    return None


def baseline_kernel(desc: Mapping[str, Any]):
    """The TE kernel of an :func:`infer_baseline` description."""
    if desc["kind"] == "conv2d":
        return conv2d_nchw_te(desc["N"], desc["C_in"], desc["C_out"], desc["H"], desc["W"], desc["k"],
                              stride=desc["stride"])
    return dense_te(desc["N"], desc["C_in"], desc["C_out"])


def baseline_module(desc: Mapping[str, Any]):
    """The torch module of an :func:`infer_baseline` description (no bias, like the kernel)."""
    from torch import nn

    if desc["kind"] == "conv2d":
        return nn.Conv2d(desc["C_in"], desc["C_out"], desc["k"], stride=desc["stride"], padding=desc["k"] // 2,
                         bias=False)
    return nn.Linear(desc["C_in"], desc["C_out"], bias=False)


def describe(desc: Mapping[str, Any]) -> str:
    if desc["kind"] == "conv2d":
        return (f"conv2d {desc['C_in']}->{desc['C_out']} {desc['H']}x{desc['W']} k={desc['k']} "
                f"s={desc['stride']} N={desc['N']}")
    return f"dense {desc['C_in']}->{desc['C_out']} N={desc['N']}"


def is_kernel(obj: Any) -> bool:
    """A PrimFunc / IRModule (callable objects in TVM, but kernels here, not factories)."""
    try:
        import tvm

        return isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc))
    except Exception:  # noqa: BLE001 -- TVM missing or broken: not a kernel
        return False
