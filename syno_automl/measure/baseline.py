"""Baselines: the layer an operator replaces, as a TE kernel (for TVM) and as a torch module (eager/Inductor).

:func:`infer_baseline` reads it off the program's shapes: conv2d NCHW for ``[N, C_in, H, W] -> [N, C_out, H', W']``,
conv1d NCW for ``[N, C_in, L] -> [N, C_out, L']``, dense for ``[N, C_in] -> [N, C_out]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from syno_automl.errors import OptionError

__all__ = ["conv2d_nchw_te", "conv1d_ncw_te", "dense_te", "infer_baseline", "baseline_kernel", "baseline_module",
           "describe", "is_kernel"]

#: the spatial coordinates of each conv baseline (the first of them in the kernels' index names)
_SPATIAL = {"conv1d": ("L",), "conv2d": ("H", "W")}


def conv2d_nchw_te(N, C_in, C_out, H, W, k, stride=1, groups=1, dtype="float32"):
    """PrimFunc ``main(x[N,C_in,H,W], w[C_out,C_in/groups,k,k], out)``: conv2d NCHW, zero padding k//2
    ("same" for stride 1, like the UNFOLD primitive), no bias."""
    return _conv_te(N, C_in, C_out, (H, W), k, stride, groups, dtype, "conv2d")


def conv1d_ncw_te(N, C_in, C_out, L, k, stride=1, groups=1, dtype="float32"):
    """PrimFunc ``main(x[N,C_in,L], w[C_out,C_in/groups,k], out)``: conv1d NCW, zero padding k//2 ("same" for
    stride 1, like the UNFOLD primitive), no bias."""
    return _conv_te(N, C_in, C_out, (L,), k, stride, groups, dtype, "conv1d")


def _conv_te(N: int, C_in: int, C_out: int, sizes: Sequence[int], k: int, stride: int, groups: int, dtype: str,
             name: str):
    """A conv over ``len(sizes)`` spatial coordinates (1 or 2): padded input, then one sum per output element."""
    from tvm import te, tirx

    if C_in % groups or C_out % groups:
        raise OptionError(f"groups={groups} must divide C_in={C_in} and C_out={C_out}")
    cig, cog = C_in // groups, C_out // groups
    pad, nd = k // 2, len(sizes)
    x = te.placeholder((N, C_in, *sizes), dtype, name="x")
    w = te.placeholder((C_out, cig, *([k] * nd)), dtype, name="w")

    def padded(n, c, *at):
        inside = tirx.all(*[cond for i, s in zip(at, sizes) for cond in (i >= pad, i < s + pad)])
        at_x = (n, c, *[i - pad for i in at])
        return tirx.if_then_else(inside, x[at_x], tirx.const(0, dtype))

    xp = te.compute((N, C_in, *[s + 2 * pad for s in sizes]), padded, name="pad", varargs_names=["h", "v"][-nd:])
    rc = te.reduce_axis((0, cig), name="rc")
    rs = [te.reduce_axis((0, k), name=r) for r in ["ry", "rx"][-nd:]]

    def conv(n, o, *at):
        at_x = (n, tirx.floordiv(o, cog) * cig + rc, *[i * stride + r for i, r in zip(at, rs)])
        at_w = (o, rc, *rs)
        return te.sum(xp[at_x] * w[at_w], axis=[rc, *rs])

    outs = [(s + 2 * pad - k) // stride + 1 for s in sizes]
    out = te.compute((N, C_out, *outs), conv, name=name, varargs_names=["i", "j"][-nd:])
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
    * ``[N, C_in, L] -> [N, C_out, L']`` with ``L' = ceil(L / s)``: conv1d NCW, the same way;
    * ``[N, C_in] -> [N, C_out]``: dense (``x @ w.T``, torch's Linear without bias).

    Returns ``{"kind": "conv2d", "N":, "C_in":, "C_out":, "H":, "W":, "k":, "stride":}`` (``"conv1d"`` with ``"L"``)
    or ``{"kind": "dense", "N":, "C_in":, "C_out":}``."""
    i, o = [int(v) for v in program["input"]["shape"]], [int(v) for v in program["output"]["shape"]]
    if len(i) == len(o) and len(i) in (3, 4) and i[0] == o[0]:
        kind = "conv1d" if len(i) == 3 else "conv2d"
        sizes, outs = i[2:], o[2:]
        for s in range(1, max(sizes) + 1):
            if all(-(-n // s) == m for n, m in zip(sizes, outs)):
                return {"kind": kind, "N": i[0], "C_in": i[1], "C_out": o[1], **dict(zip(_SPATIAL[kind], sizes)),
                        "k": int(kernel_size or 3), "stride": s}
        return None
    if len(i) == 2 and len(o) == 2 and i[0] == o[0]:
        return {"kind": "dense", "N": i[0], "C_in": i[1], "C_out": o[1]}
    return None


def baseline_kernel(desc: Mapping[str, Any]):
    """The TE kernel of an :func:`infer_baseline` description."""
    if desc["kind"] in _SPATIAL:
        sizes = tuple(desc[d] for d in _SPATIAL[desc["kind"]])
        return _conv_te(desc["N"], desc["C_in"], desc["C_out"], sizes, desc["k"], desc["stride"], 1, "float32",
                        desc["kind"])
    return dense_te(desc["N"], desc["C_in"], desc["C_out"])


def baseline_module(desc: Mapping[str, Any]):
    """The torch module of an :func:`infer_baseline` description (no bias, like the kernel)."""
    from torch import nn

    conv = {"conv1d": nn.Conv1d, "conv2d": nn.Conv2d}.get(desc["kind"])
    if conv is not None:
        return conv(desc["C_in"], desc["C_out"], desc["k"], stride=desc["stride"], padding=desc["k"] // 2, bias=False)
    return nn.Linear(desc["C_in"], desc["C_out"], bias=False)


def describe(desc: Mapping[str, Any]) -> str:
    if desc["kind"] in _SPATIAL:
        sizes = "x".join(str(desc[d]) for d in _SPATIAL[desc["kind"]])
        return (f"{desc['kind']} {desc['C_in']}->{desc['C_out']} {sizes} k={desc['k']} "
                f"s={desc['stride']} N={desc['N']}")
    return f"dense {desc['C_in']}->{desc['C_out']} N={desc['N']}"


def is_kernel(obj: Any) -> bool:
    """A PrimFunc / IRModule (callable objects in TVM, but kernels here, not factories)."""
    try:
        import tvm

        return isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc))
    except Exception:  # noqa: BLE001 -- TVM missing or broken: not a kernel
        return False
