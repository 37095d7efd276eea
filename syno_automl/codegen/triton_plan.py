"""Which programs the Triton backend can run as one kernel, and how it tiles them (:func:`triton_support`).

The kernel computes the oracle form of docs/architecture.md §1 with one weight,
``out[i] = SCALE · Σ_r x[e_x(i, r)] · w[e_w(i, r)]``, as a GEMM over groups of the output iterators:

* M: iterators the weight's expressions do not use (the run-time sized batch first; also iterators no tensor
  uses, along which the output is broadcast), rows of the tile;
* N: iterators only the weight uses (C_out of a conv), columns of the tile;
* B: iterators both use (the groups of a grouped conv), one program each; with no N iterator (a depthwise
  form: each output element is one row's Σ_k x·w) they join M instead, and the weight is gathered per row;
* K: every reduction, the summed dim of the tile product (``tl.dot`` when N and K reach 16, else a broadcast
  multiply-sum).

So every single-weight form is one kernel; what it costs is 2·Π|i|·Π|r| FLOPs, and a form that costs more than
the planned steps (the staged plan summed before multiplying: a FLOP-increasing single loop nest) is refused,
as are programs with no weight or several (two GEMMs: a back-to-back kernel not generated here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from syno_automl.ir import Program, count_flops, oracle, parse
from syno_automl.ir.errors import IRError
from syno_automl.ir.expr import iter_nodes

__all__ = ["Support", "KernelPlan", "triton_support", "REASONS"]

# the reasons a program falls back to the torch lowering (Support.code)
REASONS = {
    "no-expr": "the program has no oracle form (program.expr)",
    "weights": "not exactly one weight",
    "flops": "the one-loop-nest form costs more FLOPs than the planned steps",
    "free-weight": "a run-time sized dim indexes the weight or is used by both operands",
    "free-output": "several run-time sized dims, or one the input does not have",
}


@dataclass(frozen=True)
class KernelPlan:
    """How the kernel tiles one program: iterator indices (into ``expr.iterators``) per group, in the order
    they are flattened (last fastest), and the sizes. ``free``: iterator indices that are run-time sized."""

    m: tuple[int, ...]
    n: tuple[int, ...]
    b: tuple[int, ...]
    iterators: tuple[int, ...]
    reductions: tuple[int, ...]
    free: tuple[int, ...]
    scale: float
    flops: int            # of the one-loop-nest form at the program's sizes
    planned_flops: float  # of the planned steps

    @property
    def n_size(self) -> int:
        return math.prod(self.iterators[j] for j in self.n)

    @property
    def b_size(self) -> int:
        return math.prod(self.iterators[j] for j in self.b)

    @property
    def k_size(self) -> int:
        return math.prod(self.reductions)

    @property
    def dot(self) -> bool:
        """``tl.dot`` needs every tile dim >= 16: used when N and K are that large."""
        return self.n_size >= 16 and self.k_size >= 16

    @property
    def rowsum(self) -> bool:
        """No N iterator: each output element is a row's sum of x · w with both gathered per row (a depthwise
        form), so the B iterators join the rows (one program per row tile, not one per B value)."""
        return not self.n


@dataclass(frozen=True)
class Support:
    """``ok``: one Triton kernel computes the program; else ``code`` (a key of :data:`REASONS`) and ``reason``
    say why it falls back to the torch lowering."""

    ok: bool
    code: str = ""
    reason: str = ""
    plan: KernelPlan | None = field(default=None, repr=False)


def _iterators(es) -> set[int]:
    return {n.value for e in es for n in iter_nodes(e) if n.op == "it"}


def _planned_flops(p: Program) -> float:
    cost = p.extra.get("cost")
    if isinstance(cost, Mapping) and "flops" in cost:
        return float(cost["flops"])
    return float(count_flops(p))


def triton_support(program: Mapping[str, Any] | Program) -> Support:
    """Whether ``program`` (an ``op.program(mapping)`` dict or a parsed Program) runs as one Triton kernel, and
    its tiling. Never raises for a valid program; an invalid one raises ``IRError`` from the parser."""
    p = parse(program)
    if p.expr is None:
        return Support(False, "no-expr", REASONS["no-expr"])
    try:
        ex = oracle(p)
    except IRError as e:
        return Support(False, "no-expr", f"{REASONS['no-expr']}: {e}")
    if len(p.weights) != 1:
        return Support(False, "weights", f"{len(p.weights)} weights (the kernel takes exactly one)")
    flops = 2 * math.prod(ex.iterators) * math.prod(ex.reductions)
    planned = _planned_flops(p)
    if flops > planned * (1 + 1e-9):
        return Support(False, "flops", f"one loop nest costs {flops} FLOPs, the planned steps {planned:.0f}")
    out_dims = list(p.output.dims)
    free = tuple(j for j, d in enumerate(out_dims) if d in p.free_dims)
    if len(free) > 1 or any(out_dims[j] not in p.input.dims for j in free):
        return Support(False, "free-output", REASONS["free-output"])
    xs, ws = _iterators(ex.input), _iterators(ex.weights[0])
    b = tuple(j for j in range(len(ex.iterators)) if j in xs and j in ws)
    n = tuple(j for j in range(len(ex.iterators)) if j in ws and j not in xs)
    if any(j in free for j in b + n):
        return Support(False, "free-weight", REASONS["free-weight"])
    rest = [j for j in range(len(ex.iterators)) if j not in ws or not n]
    if not n:
        b = ()
    m = tuple(sorted(rest, key=lambda j: j not in free))  # run-time sized first: its extent needs no divisor
    plan = KernelPlan(m, n, b, tuple(ex.iterators), tuple(ex.reductions), free, ex.scale, flops, planned)
    return Support(True, plan=plan)

