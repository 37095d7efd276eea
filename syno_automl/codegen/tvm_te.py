"""TVM tensor expressions from the kernel IR: a step backend (one ``te.compute`` per step) and an expression
backend (one ``te.compute`` straight from the oracle of §1), each one table over ``syno_automl.ir``.

* :func:`program_to_te` -- stage by stage: ``TEGen.STEPS`` handles each op of the IR walker (plus a final permute
  when needed). This is what gets compiled and tuned.
* :func:`fused_te` -- ``program.expr`` folded through :func:`expr_table` into one ``te.compute``; a cross-check of
  the stage-wise lowering.

Broadcast dims (the walker's ``State.bcast``) are not part of the materialized buffer until a step makes the
data depend on them. ``unfold`` pads with zeros by guarding ``0 <= m + w - k//2 < |src dim|``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tvm
from tvm import te, tirx

from syno_automl.ir import (
    Program,
    State,
    StepBackend,
    Transition,
    fold,
    oracle,
    parse,
    walk,
    weight_order,
    weight_program,
)
from syno_automl.ir.errors import IRError
from syno_automl.ir.program import Contract, Expand, Merge, Reduce, Shift, Split, Stride, Unfold

__all__ = ["TEGen", "program_to_te", "fused_te", "expr_table"]


def _all(conds: Sequence[Any]):
    if not conds:
        return None
    return tirx.all(*conds) if len(conds) > 1 else conds[0]


def _guarded(conds: Sequence[Any], value, dtype: str):
    cond = _all(conds)
    return value if cond is None else tirx.if_then_else(cond, value, tirx.const(0, dtype))


def _idx_dtype(e) -> str:
    """The dtype of an integer PrimExpr (TVM 0.27: ``.dtype`` is gone from Var/Add, ``.ty`` prints it)."""
    ty = getattr(e, "ty", None)
    if ty is not None:
        return str(getattr(ty, "dtype", ty))
    return str(getattr(e, "dtype", "int32"))


def _wrap_next(i, n: int):
    """``(i + 1) mod n`` for ``0 <= i < n``, as a select: TVM 0.27's FlattenBuffer (IterMapSimplify) drops the
    offset of floordiv(floormod(x, c) + k, c)-like indices, which inlined shifts would produce."""
    if n == 1:
        return tirx.const(0, _idx_dtype(i))
    return tirx.Select(i + 1 < n, i + 1, tirx.const(0, _idx_dtype(i)))


class TEGen(StepBackend):
    """The running tensor T as a TE tensor over its stored dims; one ``te.compute`` per step that moves data."""

    def __init__(self, program: Program, x: te.Tensor, weights: list[te.Tensor], prefix: str = "T") -> None:
        self.p, self.x, self.weights, self.prefix = program, x, weights, prefix
        self.tensor = x
        self.state = State(tuple(program.input.dims))
        self.dtype = program.dtype
        self.count = 0

    def shape(self, dims: Sequence[int]) -> list[int]:
        return [self.p.sizes[d] for d in dims]

    def _name(self, op: str) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}_{op}"

    def view(self, name: str, post: State, src_of: Mapping[int, Callable[[dict], Any]],
             guards: Sequence[Callable[[dict], Any]] = ()) -> None:
        """One te.compute: T'[post's stored dims] = guard ? T[src_of(...)] : 0 (identity for dims not in src_of)."""
        old, new, src = self.state.stored, post.stored, self.tensor

        def body(*vs):
            env = dict(zip(new, vs))
            idx = [src_of[d](env) if d in src_of else env[d] for d in old]
            return _guarded([g(env) for g in guards], src(*idx), self.dtype)

        self.tensor = te.compute(self.shape(new), body, name=self._name(name))
        self.state = post

    def relabel(self, tr: Transition) -> None:
        """A step that does not touch the buffer (it only acts on broadcast dims)."""
        self.state = tr.post

    # -- steps ------------------------------------------------------------------------------------------
    def split(self, tr: Transition[Split]) -> None:
        d, (a, b) = tr.step.src, tr.step.dst
        if d in tr.pre.bcast:
            return self.relabel(tr)
        nb = self.p.sizes[b]
        self.view("split", tr.post, {d: lambda e: e[a] * nb + e[b]})

    def merge(self, tr: Transition[Merge]) -> None:
        (a, b), d = tr.step.src, tr.step.dst
        if a in tr.pre.bcast and b in tr.pre.bcast:
            return self.relabel(tr)
        nb = self.p.sizes[b]
        self.view("merge", tr.post, {a: lambda e: tirx.floordiv(e[d], nb), b: lambda e: tirx.floormod(e[d], nb)})

    def shift(self, tr: Transition[Shift]) -> None:
        d, e_ = tr.step.src, tr.step.dst
        if d in tr.pre.bcast:
            return self.relabel(tr)
        n = self.p.sizes[d]
        self.view("shift", tr.post, {d: lambda e: _wrap_next(e[e_], n)})

    def stride(self, tr: Transition[Stride]) -> None:
        d, e_, s = tr.step.src, tr.step.dst, tr.step.stride
        if d in tr.pre.bcast:
            return self.relabel(tr)
        n = self.p.sizes[d]
        guards = [lambda e: e[e_] * s < n] if (self.p.sizes[e_] - 1) * s >= n else []
        self.view("stride", tr.post, {d: lambda e: e[e_] * s}, guards)

    def unfold(self, tr: Transition[Unfold]) -> None:
        d, (m, w), k = tr.step.src, tr.step.dst, tr.step.window
        n, half = self.p.sizes[d], k // 2  # bound of the padding guard: the DIMENSION size, not the window

        def idx(e):
            return e[m] + e[w] - half

        def guard(e):
            i = idx(e)
            return tirx.all(i >= 0, i < n)

        # even when d is a broadcast, the zero padding makes T' depend on (m, w): they are stored
        self.view("unfold", tr.post, {d: idx} if d not in tr.pre.bcast else {}, [guard])

    def expand(self, tr: Transition[Expand]) -> None:
        self.relabel(tr)

    def reduce(self, tr: Transition[Reduce]) -> None:
        d, mean, n = tr.step.src, tr.step.mean, self.p.sizes[tr.step.src]
        src = self.tensor
        if d in tr.pre.bcast:  # the data does not depend on d: the sum is n * T, the mean is T
            if not mean:
                self.tensor = te.compute(src.shape, lambda *i: src(*i) * tirx.const(float(n), self.dtype),
                                         name=self._name("reduce"))
            return self.relabel(tr)
        old, new = tr.pre.stored, tr.post.stored
        r = te.reduce_axis((0, n), name=f"r{d}")

        def body(*vs):
            env = dict(zip(new, vs))
            env[d] = r
            return te.sum(src(*[env[x] for x in old]), axis=[r])

        self.tensor = te.compute(self.shape(new), body, name=self._name("reduce"))
        self.state = tr.post
        if mean:
            summed = self.tensor
            self.tensor = te.compute(summed.shape, lambda *i: summed(*i) / tirx.const(float(n), self.dtype),
                                     name=self._name("mean"))

    def contract(self, tr: Transition[Contract]) -> None:
        c = tr.contract
        assert c is not None  # advance resolves every contract step
        w, wdims = self.weights[c.k], list(c.weight.dims)
        tdims = list(c.renamed.stored)
        # a summed letter that only T has, and only as a broadcast, is a constant factor, not a loop
        loop_dims = [d for d in c.summed if d not in c.factor_dims]
        new_tdims = list(tr.post.stored)
        raxes = {d: te.reduce_axis((0, self.p.sizes[d]), name=f"r{d}") for d in loop_dims}
        factor = math.prod(self.p.sizes[d] for d in c.factor_dims)
        src = self.tensor

        def body(*vs):
            env = dict(zip(new_tdims, vs))
            env.update(raxes)
            val = src(*[env[d] for d in tdims]) * w(*[env[d] for d in wdims])
            if factor != 1:
                val = val * tirx.const(float(factor), self.dtype)
            return te.sum(val, axis=list(raxes.values())) if raxes else val

        self.tensor = te.compute(self.shape(new_tdims), body, name=self._name(f"contract{c.k}"))
        self.state = tr.post

    STEPS = {"split": split, "merge": merge, "shift": shift, "stride": stride, "unfold": unfold, "expand": expand,
             "reduce": reduce, "contract": contract}

    def finish(self, state: State) -> None:
        """(end) permute T to output.dims, materializing what is still broadcast."""
        out_dims = list(self.p.output.dims)
        if self.tensor is self.x or self.state.bcast or list(self.state.stored) != out_dims:
            src, tdims = self.tensor, self.state.stored

            def body(*vs):
                env = dict(zip(out_dims, vs))
                return src(*[env[d] for d in tdims])

            self.tensor = te.compute(self.shape(out_dims), body, name="out" if self.prefix == "T" else self.prefix)


def program_to_te(program: Mapping[str, Any] | Program) -> tuple[list[te.Tensor], te.Tensor]:
    """Stage-wise TE of a program: ``([x, w_0, ..., w_{m-1}], out)``, one te.compute per step."""
    p = parse(program)
    x = te.placeholder(list(p.input.shape), p.dtype, name="x")
    weights = [te.placeholder(list(w.shape), p.dtype, name=f"w{k}") for k, w in enumerate(p.weights)]
    read = list(weights)  # each weight as its contraction reads it: the planner's views, with this step table
    for k in weight_order(p):  # a weight contracted with another comes after it
        sub = TEGen(weight_program(p, k), weights[k], read, prefix=f"w{k}v")
        walk(sub.p, sub)
        read[k] = sub.tensor
    gen = TEGen(p, x, read)
    walk(p, gen)
    got = [int(n) for n in gen.tensor.shape]
    if got != list(p.output.shape):
        raise IRError(f"output shape {got} != program output shape {list(p.output.shape)}")
    return [x, *weights], gen.tensor


# --------------------------------------------------------------------------------------------------
# fused lowering from program.expr (the oracle)
# --------------------------------------------------------------------------------------------------


def _divmod(op: str, a, c: int, analyzer):
    """floordiv / floormod, as selects when the bounds of ``a`` allow it.

    TVM 0.27 mis-lowers some nested floordiv/floormod index expressions: FlattenBuffer's IterMapSimplify
    turns ``floordiv(floormod(i, 4) + 1, 4)`` into 0 (the offset is dropped), so the oracle's
    ``mod(x + 1, n)`` (a SHIFT) feeding a ``div`` (a MERGE) computes wrong indices.  When
    ``0 <= a < 2c`` the quotient is 0 or 1 and a select is exact and opaque to that rewrite."""
    if analyzer is not None and c > 0:
        bound = analyzer.const_int_bound(a)
        lo, hi = int(bound.min_value), int(bound.max_value)
        if 0 <= lo and hi < c:
            return a if op == "mod" else tirx.const(0, _idx_dtype(a))
        if 0 <= lo and hi < 2 * c:
            if op == "mod":
                return tirx.Select(a < c, a, a - c)
            dt = _idx_dtype(a)
            return tirx.Select(a < c, tirx.const(0, dt), tirx.const(1, dt))
    cc = tirx.const(c, "int32")
    return tirx.floordiv(a, cc) if op == "div" else tirx.floormod(a, cc)


def expr_table(its: Sequence = (), reds: Sequence = (), guards: list | None = None, analyzer=None) -> dict:
    """op -> handler(node, *children) building a PrimExpr; ``pad`` appends its guard to ``guards``."""

    def pad(node, a):
        guards.append(tirx.all(a >= 0, a < node.value))
        return a

    return {
        "it": lambda node: its[node.value],
        "red": lambda node: reds[node.value],
        "const": lambda node: tirx.const(node.value, "int32"),
        "add": lambda node, a, b: a + b,
        "sub": lambda node, a, b: a - b,
        "mul": lambda node, a: a * tirx.const(node.value, "int32"),
        "div": lambda node, a: _divmod("div", a, node.value, analyzer),
        "mod": lambda node, a: _divmod("mod", a, node.value, analyzer),
        "pad": pad,
    }


def _analyzer(its, reds, it_sizes, red_sizes):
    try:
        from tvm.sym.analyzer import Analyzer  # TVM 0.27: tvm.arith moved to tvm.sym
    except ImportError:  # pragma: no cover - older TVM
        from tvm.arith import Analyzer
    ana = Analyzer()
    for v, n in zip(its, it_sizes):
        ana.bind(v, tvm.ir.Range(0, int(n)))
    for r, n in zip(reds, red_sizes):
        ana.bind(r.var, tvm.ir.Range(0, int(n)))
    return ana


def fused_te(program: Mapping[str, Any] | Program) -> tuple[list[te.Tensor], te.Tensor]:
    """A single te.compute from ``program.expr``:
    ``out[i] = SCALE * sum_r x[e_x(i, r)] * prod_k w_k[e_k(i, r)]`` (terms failing a pad guard are 0)."""
    p = parse(program)
    ex = oracle(p)
    x = te.placeholder(list(p.input.shape), p.dtype, name="x")
    weights = [te.placeholder(list(w.shape), p.dtype, name=f"w{k}") for k, w in enumerate(p.weights)]
    reds = [te.reduce_axis((0, n), name=f"r{j}") for j, n in enumerate(ex.reductions)]
    scale = ex.scale

    def body(*its: Any) -> Any:
        guards: list = []
        table = expr_table(its, reds, guards, _analyzer(its, reds, ex.iterators, ex.reductions))
        val = x(*[fold(e, table) for e in ex.input])
        for w, es in zip(weights, ex.weights):
            val = val * w(*[fold(e, table) for e in es])
        if scale != 1.0:
            val = val * tirx.const(scale, p.dtype)
        val = _guarded(guards, val, p.dtype)
        return te.sum(val, axis=reds) if reds else val

    out = te.compute(list(ex.iterators), body, name="out_fused")
    return [x, *weights], out
