"""TVM code generation from the kernel IR ("program", docs/architecture.md §2): building and running kernels.

Two lowerings of the same program live in codegen/tvm_te.py, each a table over ``syno_automl.ir``:

* :func:`program_to_te` -- stage by stage: one ``te.compute`` per view / reduce / contract step (plus a final
  permute when needed).  This is what gets compiled and tuned.
* :func:`fused_te` -- one ``te.compute`` straight from ``program["expr"]`` (the oracle of §1).  Used as a
  cross-check of the stage-wise lowering.

:func:`program_to_primfunc` wraps the stage-wise TE into a PrimFunc (``global_symbol = "main"``) and
:func:`build_kernel` compiles it into a numpy-callable ``kernel(x, *weights) -> np.ndarray``. Programs are dicts
(JSON string keys accepted) or parsed ``syno_automl.ir.Program``s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import tvm
from tvm import te, tirx

from syno_automl.codegen.tvm_te import fused_te, program_to_te
from syno_automl.errors import KernelArgumentError, OptionTypeError, ShapeError
from syno_automl.ir import Program

__all__ = [
    "program_to_te",
    "program_to_primfunc",
    "program_to_irmodule",
    "fused_te",
    "fused_primfunc",
    "make_target",
    "build_kernel",
    "Kernel",
]


# --------------------------------------------------------------------------------------------------
# PrimFunc / build
# --------------------------------------------------------------------------------------------------


def _to_primfunc(inputs: list[te.Tensor], out: te.Tensor) -> tirx.PrimFunc:
    return te.create_prim_func([*inputs, out]).with_attr("global_symbol", "main")


def program_to_primfunc(program: Mapping[str, Any] | Program) -> tirx.PrimFunc:
    """The stage-wise PrimFunc ``main(x, w_0, ..., w_{m-1}, out)``."""
    return _to_primfunc(*program_to_te(program))


def fused_primfunc(program: Mapping[str, Any]) -> tirx.PrimFunc:
    return _to_primfunc(*fused_te(program))


def program_to_irmodule(program_or_func) -> tvm.IRModule:
    """Program dict, PrimFunc or IRModule -> IRModule with the function under ``main``."""
    if isinstance(program_or_func, tvm.IRModule):
        return program_or_func
    if isinstance(program_or_func, tirx.PrimFunc):
        func = program_or_func
    elif isinstance(program_or_func, (Mapping, Program)):
        func = program_to_primfunc(program_or_func)
    else:
        raise OptionTypeError(f"expected a program dict, PrimFunc or IRModule, got a {type(program_or_func).__name__}")
    if func.attrs is None or "global_symbol" not in func.attrs:
        func = func.with_attr("global_symbol", "main")
    return tvm.IRModule({"main": func})


def make_target(target: Any = "llvm") -> tvm.target.Target:
    """``"llvm"`` -> the host CPU (mcpu = LLVM's host CPU name, num-cores = os.cpu_count());
    ``"cuda"`` -> the local GPU (from the device when one is present); a Target or JSON dict passes through.

    TVM 0.27 rejects CLI strings with options ("llvm -mcpu=..."): options go in the JSON dict form."""
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, Mapping):
        return tvm.target.Target(dict(target))
    spec = str(target).strip()
    if spec == "llvm":
        return tvm.target.Target(
            {
                "kind": "llvm",
                "mcpu": tvm.target.codegen.llvm_get_system_cpu(),
                "num-cores": os.cpu_count() or 1,
            }
        )
    if spec == "cuda":
        dev = tvm.cuda(0)
        if dev.exist:
            try:
                return tvm.target.Target.from_device(dev)
            except Exception:  # noqa: BLE001 -- a generic cuda target below  # pragma: no cover - GPU host
                pass
        return tvm.target.Target("cuda")
    if spec.startswith("{"):
        import json

        return tvm.target.Target(json.loads(spec))
    return tvm.target.Target(spec)


def default_gpu_schedule(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """Untuned GPU kernels need thread bindings: apply DLight's default rules (Fallback last).

    DLight's analyses assert on some access patterns of ours (an UNFOLD's window read has extent > 1 in
    ``detect_dominant_read``); a rule that raises is treated as not applicable, so the next one gets its turn."""
    from tvm.s_tir import dlight as dl

    class NotApplicableOnError(dl.ScheduleRule):
        def __init__(self, rule: dl.ScheduleRule) -> None:
            self.rule = rule

        def apply(self, func, target, tunable):
            try:
                return self.rule.apply(func, target, tunable)
            except Exception:  # noqa: BLE001 -- any analysis failure means "this rule does not fit"
                return None

    rules = [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction()]
    with target:
        return dl.ApplyDefaultSchedule(*[NotApplicableOnError(r) for r in rules], dl.gpu.Fallback())(mod)


def device_for(target: tvm.target.Target, index: int = 0):
    kind = target.kind.name
    if kind == "llvm" or kind == "c":
        return tvm.cpu(index)
    if kind == "cuda":
        return tvm.cuda(index)
    return tvm.device(kind, index)


def arg_shapes(func: tirx.PrimFunc) -> list[tuple[list[int], str]]:
    """(shape, dtype) of every buffer parameter of a PrimFunc, in parameter order."""
    out = []
    bmap = getattr(func, "buffer_map", None)  # TVM <= 0.2x; in 0.27 the params carry the buffer type
    for p in func.params:
        buf = bmap[p] if bmap is not None else p
        out.append(([int(n) for n in buf.shape], str(buf.dtype)))
    return out


class Kernel:
    """A compiled program: ``kernel(x, *weights) -> np.ndarray`` (numpy in, numpy out).

    ``exe`` is the ``tvm.runtime.Executable`` from ``tvm.compile`` (``exe.mod`` is the runtime module,
    e.g. for ``time_evaluator``); ``func`` is the PrimFunc it was built from."""

    def __init__(self, exe, func: tirx.PrimFunc, target: tvm.target.Target, dev=None):
        self.exe = exe
        self.func = func
        self.target = target
        self.dev = dev if dev is not None else device_for(target)
        self.args = arg_shapes(func)
        self._fn = exe["main"]

    @property
    def out_shape(self) -> list[int]:
        return self.args[-1][0]

    def __call__(self, x, *weights) -> np.ndarray:
        ins = [x, *weights]
        if len(ins) != len(self.args) - 1:
            raise KernelArgumentError(f"kernel takes {len(self.args) - 1} arrays (x and weights), got {len(ins)}")
        tins = []
        for a, (shape, dtype) in zip(ins, self.args[:-1]):
            a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
            if list(a.shape) != shape:
                raise ShapeError(f"argument shape {list(a.shape)} != expected {shape}")
            tins.append(tvm.runtime.tensor(a, self.dev))
        shape, dtype = self.args[-1]
        out = tvm.runtime.empty(shape, dtype, self.dev)
        self._fn(*tins, out)
        return out.numpy()


def build_kernel(program_or_func, target: Any = "llvm") -> Kernel:
    """Compile a program (stage-wise PrimFunc, default schedule) or a PrimFunc/IRModule for ``target``."""
    tgt = make_target(target)
    mod = program_to_irmodule(program_or_func)
    if tgt.kind.name == "cuda":
        mod = default_gpu_schedule(mod, tgt)
    exe = tvm.compile(mod, target=tgt)
    return Kernel(exe, mod["main"], tgt)
