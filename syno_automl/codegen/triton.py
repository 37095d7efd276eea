"""Triton backend: one generated GPU kernel (forward) per single-weight operator.

``triton_support(program) -> Support(ok, code, reason, plan)`` says whether a program runs as one kernel
(codegen/triton_plan.py: exactly one weight, and its one-loop-nest form ``program.expr`` costs no more FLOPs than
the planned steps) and how it is tiled. ``triton_source(op_or_program, mapping=None, class_name=...) -> str`` is
a standalone Python file that imports only ``os``, ``torch`` and ``triton``, and defines:

* ``syno_kernel`` -- the autotuned ``@triton.jit`` kernel (codegen/triton_kernel.py),
* ``syno_forward(x, w0, precision="ieee")`` -- launches it (x on a CUDA device, or on the CPU under
  ``TRITON_INTERPRET=1``),
* ``syno_operator(x, w0)`` -- the same as a differentiable function (``SynoTritonFunction``),
* ``class <class_name>(torch.nn.Module)`` -- with the parameter ``w0`` of ``op.to_module(mapping)`` (same name,
  shape and initialization: weights copy between them with ``load_state_dict``). On a CPU tensor outside the
  interpreter it runs the torch lowering instead (Triton has no CPU backend).

Backward: ``backward_mode == "torch-autograd"`` -- no dX/dW kernels are generated; the backward recomputes
the forward with the torch lowering (``codegen/torch.py``'s code, in the same file) under torch autograd and
returns its gradients. The fp32 ``tl.dot`` precision is ``"tf32"`` when
``torch.backends.cuda.matmul.allow_tf32`` is set (as for the torch lowering's mm), else ``"ieee"``.

``build_triton_module(op_or_program, mapping=None)`` builds that module, or, for a program the kernel cannot
express, the torch lowering (``op.to_module``), logging the reason at INFO and counting it
(:func:`fallback_counts`); either module says which it is (``module.syno_backend``: ``"triton"`` / ``"torch"``,
``module.fallback_reason``).

Example (export one operator's kernel as a file, e.g. for a GPU machine without syno_automl)::

    from syno_automl.codegen.triton import triton_source, triton_support
    if triton_support(op.program(0)).ok:
        open("op_triton.py", "w").write(triton_source(op, 0))
    # there: from op_triton import SynoTriton; m = SynoTriton().cuda(); y = m(x)   (or syno_operator(x, w0))
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping
from typing import Any

from syno_automl.codegen.loader import load_class
from syno_automl.codegen.torch import build_module, program_to_source
from syno_automl.codegen.triton_kernel import KERNEL_NAME, LAUNCH_NAME, kernel_source
from syno_automl.codegen.triton_plan import REASONS, KernelPlan, Support, triton_support
from syno_automl.echo import shown
from syno_automl.errors import OptionError
from syno_automl.ir import Program, parse

__all__ = ["triton_support", "triton_source", "build_triton_module", "fallback_counts", "Support", "KernelPlan",
           "REASONS", "BACKWARD_MODE", "KERNEL_NAME", "LAUNCH_NAME"]

log = logging.getLogger(__name__)
BACKWARD_MODE = "torch-autograd"
_FALLBACKS: collections.Counter[str] = collections.Counter()


def fallback_counts() -> dict[str, int]:
    """How many modules :func:`build_triton_module` built with the torch lowering, by reason code."""
    return dict(_FALLBACKS)


def _program(op_or_program: Any, mapping: Any) -> tuple[Program, str]:
    """(parsed program, a name for the class) of an Operator and a mapping, or of a program."""
    if isinstance(op_or_program, (Mapping, Program)):
        return parse(op_or_program), "SynoTriton"
    if hasattr(op_or_program, "program") and hasattr(op_or_program, "hash"):
        return parse(op_or_program.program(mapping)), f"Syno_{op_or_program.hash}_triton"
    raise OptionError(f"expected an Operator or a program, got {shown(type(op_or_program).__name__)}")


_TAIL = '''


def _interpreting():
    return os.environ.get("TRITON_INTERPRET") == "1"


def _precision(x):
    tf32 = x.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
    return "tf32" if tf32 else "ieee"


class _Weights:
    """What the torch lowering's forward reads of its module: the weight."""

    def __init__(self, w0):
        self.w0 = w0


def torch_reference(x, w0):
    """The operator by the torch lowering (codegen/torch.py), differentiable in x and w0."""
    return _TorchLowering.forward(_Weights(w0), x)


class SynoTritonFunction(torch.autograd.Function):
    """Forward: the Triton kernel. Backward: the torch lowering recomputed under autograd (torch-autograd)."""

    @staticmethod
    def forward(ctx, x, w0):
        ctx.save_for_backward(x, w0)
        return {launch}(x, w0, _precision(x))

    @staticmethod
    def backward(ctx, grad):
        x, w0 = ctx.saved_tensors
        need = ctx.needs_input_grad[:2]
        with torch.enable_grad():
            xr = x.detach().requires_grad_(need[0])
            wr = w0.detach().requires_grad_(need[1])
            leaves = [t for t, n in zip((xr, wr), need) if n]
            got = iter(torch.autograd.grad(torch_reference(xr, wr), leaves, grad) if leaves else ())
        return tuple(next(got) if n else None for n in need)


def syno_operator(x, w0):
    """The operator with the Triton forward, differentiable (backward: torch autograd)."""
    return SynoTritonFunction.apply(x, w0)


class {cls}(_TorchLowering):
    """The operator as a module: parameter w0 as in the torch lowering (same name, shape and init); forward
    by the Triton kernel on a CUDA tensor (or under TRITON_INTERPRET=1), by the torch lowering on a CPU one."""

    syno_backend = "triton"
    backward_mode = "{backward}"
    fallback_reason = ""

    def forward(self, x):
        if x.is_cuda or _interpreting():
            return SynoTritonFunction.apply(x, self.w0)
        return super().forward(x)
'''


def triton_source(op_or_program: Any, mapping: Any = None, class_name: str | None = None) -> str:
    """The standalone file (module docstring above) for an Operator at ``mapping`` (an index or a dict, as
    ``op.program``) or for a program (dict or parsed). Raises ``OptionError`` naming the reason when the
    program is not supported (check :func:`triton_support` first)."""
    p, default_name = _program(op_or_program, mapping)
    name = class_name or default_name
    if not name.isidentifier():
        raise OptionError(f"class name {shown(name)} is not an identifier")
    support = triton_support(p)
    if not support.ok or support.plan is None:
        raise OptionError(f"the Triton backend cannot run this program as one kernel: {support.reason}")
    torch_src = program_to_source(p, class_name="_TorchLowering")
    lines = [f"# {name}: one Triton kernel for a Syno operator, generated by syno_automl.codegen.triton",
             "# (docs/architecture.md §2). Forward: the kernel; backward: the torch lowering under autograd.",
             "import os", "", "import torch", "import torch.nn.functional as F", "import triton",
             "import triton.language as tl", "", ""]
    lines += [ln for ln in torch_src.splitlines() if not ln.startswith(("import ", "# Generated by"))]
    lines += kernel_source(p, support.plan)
    tail = _TAIL.replace("{launch}", LAUNCH_NAME).replace("{cls}", name).replace("{backward}", BACKWARD_MODE)
    return "\n".join(lines) + tail


def build_triton_module(op_or_program: Any, mapping: Any = None):
    """The Triton module of an Operator at ``mapping`` (or of a program); the torch lowering, with the reason
    logged, counted and kept in ``module.fallback_reason``, when the program is not supported."""
    p, name = _program(op_or_program, mapping)
    support = triton_support(p)
    if support.ok:
        return load_class(triton_source(p, class_name=name), name)()
    _FALLBACKS[support.code] += 1
    log.info("Triton backend: %s falls back to the torch lowering: %s", name, support.reason)
    module = build_module(p, class_name=name.removesuffix("_triton"))
    module.syno_backend = "torch"
    module.backward_mode = "torch-autograd"
    module.fallback_reason = support.reason
    return module
