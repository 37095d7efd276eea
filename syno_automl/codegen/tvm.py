"""TVM code generation from the kernel IR ("program" dict, docs/architecture.md §2).

Two lowerings of the same program:

* :func:`program_to_te` -- stage by stage: one ``te.compute`` per view / reduce / contract step of
  ``program["steps"]`` (plus a final permute when needed).  This is what gets compiled and tuned.
* :func:`fused_te` -- one ``te.compute`` straight from ``program["expr"]`` (the oracle of §1).  Used as a
  cross-check of the stage-wise lowering.

:func:`program_to_primfunc` wraps the stage-wise TE into a PrimFunc (``global_symbol = "main"``) and
:func:`build_kernel` compiles it into a numpy-callable ``kernel(x, *weights) -> np.ndarray``.

Conventions:

* JSON turns int dict keys into strings: ``sizes`` and ``rename`` accept both.
* Broadcast dims (``expand``) are kept *virtual*: they are part of the logical dim list of the running
  tensor T, but not of its materialized buffer, until a step makes the data depend on them
  (e.g. ``unfold`` of a broadcast dim, its ``merge`` with a real dim, or the final permute).
* ``unfold`` pads with zeros by guarding ``0 <= m + w - k//2 < |src dim|`` -- the bound is the size of
  the unfolded DIMENSION (the original implementation compared against the window size: a bug).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import te, tirx

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
# small helpers
# --------------------------------------------------------------------------------------------------


def _int_keys(d: Mapping[Any, Any] | None) -> dict[int, int]:
    """``{"3": 5}`` or ``{3: 5}`` -> ``{3: 5}`` (JSON turns int keys into strings)."""
    return {int(k): int(v) for k, v in (d or {}).items()}


def _sizes(program: Mapping[str, Any]) -> dict[int, int]:
    sizes = _int_keys(program.get("sizes"))
    # the tensor specs also tell sizes; fill in anything the dict lacks and check the rest
    specs = [program["input"], program["output"], *program.get("weights", [])]
    for spec in specs:
        for d, n in zip(spec["dims"], spec["shape"]):
            d, n = int(d), int(n)
            if d in sizes and sizes[d] != n:
                raise ValueError(f"dim {d}: sizes says {sizes[d]}, a tensor spec says {n}")
            sizes.setdefault(d, n)
    return sizes


def _dtype(program: Mapping[str, Any]) -> str:
    return str(program.get("dtype", "float32"))


def _all(conds: Sequence[Any]):
    if not conds:
        return None
    return tirx.all(*conds) if len(conds) > 1 else conds[0]


def _guarded(conds: Sequence[Any], value, dtype: str):
    cond = _all(conds)
    if cond is None:
        return value
    return tirx.if_then_else(cond, value, tirx.const(0, dtype))


# --------------------------------------------------------------------------------------------------
# stage-wise lowering
# --------------------------------------------------------------------------------------------------


class _State:
    """The running data tensor T: its logical dims, which of them are virtual broadcasts, its buffer."""

    def __init__(self, tensor: te.Tensor, dims: list[int], sizes: dict[int, int], dtype: str):
        self.tensor = tensor
        self.dims = list(dims)  # logical order
        self.bcast: set[int] = set()  # logical dims not materialized in `tensor`
        self.sizes = sizes
        self.dtype = dtype
        self.count = 0

    @property
    def tdims(self) -> list[int]:
        return [d for d in self.dims if d not in self.bcast]

    def shape(self, dims: Sequence[int]) -> list[int]:
        return [self.sizes[d] for d in dims]

    def view(
        self,
        name: str,
        new_dims: list[int],
        new_bcast: set[int],
        src_of: Mapping[int, Callable[[dict], Any]],
        guards: Sequence[Callable[[dict], Any]] = (),
    ) -> None:
        """One te.compute: T'[new tdims] = guard ? T[src_of(...)] : 0 (identity for dims not in src_of)."""
        old_tdims = self.tdims
        new_tdims = [d for d in new_dims if d not in new_bcast]
        src = self.tensor

        def body(*vs):
            env = dict(zip(new_tdims, vs))
            idx = [src_of[d](env) if d in src_of else env[d] for d in old_tdims]
            return _guarded([g(env) for g in guards], src(*idx), self.dtype)

        self.tensor = te.compute(self.shape(new_tdims), body, name=self._name(name))
        self.dims, self.bcast = list(new_dims), set(new_bcast)

    def relabel(self, new_dims: list[int], new_bcast: set[int]) -> None:
        """A step that does not touch the buffer (it only acts on broadcast dims)."""
        self.dims, self.bcast = list(new_dims), set(new_bcast)

    def _name(self, op: str) -> str:
        self.count += 1
        return f"T{self.count}_{op}"


def _replace(dims: list[int], d: int, new: Sequence[int]) -> list[int]:
    if d not in dims:
        raise ValueError(f"dim {d} is not a dim of T (T has {dims})")
    i = dims.index(d)
    return dims[:i] + list(new) + dims[i + 1 :]


def _step_split(st: _State, step) -> None:
    d = int(step["src"])
    a, b = (int(v) for v in step["dst"])
    if st.sizes[a] * st.sizes[b] != st.sizes[d]:
        raise ValueError(f"split {d} -> ({a}, {b}): {st.sizes[a]}*{st.sizes[b]} != {st.sizes[d]}")
    new_dims = _replace(st.dims, d, [a, b])
    if d in st.bcast:
        st.relabel(new_dims, (st.bcast - {d}) | {a, b})
        return
    nb = st.sizes[b]
    st.view("split", new_dims, set(st.bcast), {d: lambda e: e[a] * nb + e[b]})


def _step_merge(st: _State, step) -> None:
    a, b = (int(v) for v in step["src"])
    d = int(step["dst"])
    if st.sizes[a] * st.sizes[b] != st.sizes[d]:
        raise ValueError(f"merge ({a}, {b}) -> {d}: {st.sizes[a]}*{st.sizes[b]} != {st.sizes[d]}")
    if b not in st.dims:
        raise ValueError(f"merge: dim {b} is not a dim of T (T has {st.dims})")
    new_dims = _replace([x for x in st.dims if x != b], a, [d])
    if a in st.bcast and b in st.bcast:
        st.relabel(new_dims, (st.bcast - {a, b}) | {d})
        return
    nb = st.sizes[b]
    st.view(
        "merge",
        new_dims,
        st.bcast - {a, b},
        {a: lambda e: tirx.floordiv(e[d], nb), b: lambda e: tirx.floormod(e[d], nb)},
    )


def _idx_dtype(e) -> str:
    """The dtype of an integer PrimExpr (TVM 0.27: ``.dtype`` is gone from Var/Add, ``.ty`` prints it)."""
    ty = getattr(e, "ty", None)
    if ty is not None:
        return str(getattr(ty, "dtype", ty))
    return str(getattr(e, "dtype", "int32"))


def _wrap_next(i, n: int):
    """``(i + 1) mod n`` for ``0 <= i < n``."""
    if n == 1:
        return tirx.const(0, _idx_dtype(i))
    return tirx.Select(i + 1 < n, i + 1, tirx.const(0, _idx_dtype(i)))


def _step_shift(st: _State, step) -> None:
    d, e_ = int(step["src"]), int(step["dst"])
    n = st.sizes[d]
    new_dims = _replace(st.dims, d, [e_])
    if d in st.bcast:
        st.relabel(new_dims, (st.bcast - {d}) | {e_})
        return
    # (e + 1) mod n for e in [0, n), written as a select: TVM 0.27's FlattenBuffer (IterMapSimplify) drops
    # the offset of floordiv(floormod(x, c) + k, c)-like indices, which inlined shifts would produce
    st.view("shift", new_dims, set(st.bcast), {d: lambda e: _wrap_next(e[e_], n)})


def _step_stride(st: _State, step) -> None:
    d, e_, s = int(step["src"]), int(step["dst"]), int(step["stride"])
    new_dims = _replace(st.dims, d, [e_])
    if d in st.bcast:
        st.relabel(new_dims, (st.bcast - {d}) | {e_})
        return
    n = st.sizes[d]
    guards = []
    if (st.sizes[e_] - 1) * s >= n:  # only when the sizes do not already keep e*s inside [0, n)
        guards.append(lambda e: e[e_] * s < n)
    st.view("stride", new_dims, set(st.bcast), {d: lambda e: e[e_] * s}, guards)


def _step_unfold(st: _State, step) -> None:
    d = int(step["src"])
    m, w = (int(v) for v in step["dst"])
    k = int(step["window"])
    if st.sizes[w] != k:
        raise ValueError(f"unfold {d}: window dim {w} has size {st.sizes[w]}, window is {k}")
    n = st.sizes[d]  # bound of the padding guard: the DIMENSION size, not the window
    half = k // 2
    new_dims = _replace(st.dims, d, [m, w])

    def idx(e):
        return e[m] + e[w] - half

    def guard(e):
        i = idx(e)
        return tirx.all(i >= 0, i < n)

    # even when d is a broadcast, the zero padding makes T' depend on (m, w): materialize them
    st.view("unfold", new_dims, st.bcast - {d}, {d: idx} if d not in st.bcast else {}, [guard])


def _step_expand(st: _State, step) -> None:
    d = int(step["dst"])
    if d in st.dims:
        raise ValueError(f"expand: dim {d} is already a dim of T")
    st.relabel(st.dims + [d], st.bcast | {d})


def _step_reduce(st: _State, step) -> None:
    d = int(step["src"])
    mean = bool(step.get("mean", False))
    n = st.sizes[d]
    new_dims = [x for x in st.dims if x != d]
    if d not in st.dims:
        raise ValueError(f"reduce: dim {d} is not a dim of T (T has {st.dims})")
    if d in st.bcast:
        # the data does not depend on d: the sum is n * T, the mean is T
        st.relabel(new_dims, st.bcast - {d})
        if not mean:
            src = st.tensor
            st.tensor = te.compute(
                src.shape, lambda *i: src(*i) * tirx.const(float(n), st.dtype), name=st._name("reduce")
            )
        return
    old_tdims = st.tdims
    new_tdims = [x for x in old_tdims if x != d]
    r = te.reduce_axis((0, n), name=f"r{d}")
    src = st.tensor

    def body(*vs):
        env = dict(zip(new_tdims, vs))
        env[d] = r
        return te.sum(src(*[env[x] for x in old_tdims]), axis=[r])

    st.tensor = te.compute(st.shape(new_tdims), body, name=st._name("reduce"))
    st.dims = new_dims
    if mean:
        summed = st.tensor
        st.tensor = te.compute(
            summed.shape, lambda *i: summed(*i) / tirx.const(float(n), st.dtype), name=st._name("mean")
        )


def _step_contract(st: _State, step, weights: list[te.Tensor], wdims_all: list[list[int]]) -> None:
    k = int(step["weight"])
    rename = _int_keys(step.get("rename"))
    out = [int(v) for v in step["out"]]
    w, wdims = weights[k], wdims_all[k]
    # 1. rename T's dims (a pure relabelling of the logical dims)
    dims = [rename.get(d, d) for d in st.dims]
    bcast = {rename.get(d, d) for d in st.bcast}
    if len(set(dims)) != len(dims):
        raise ValueError(f"contract: rename {rename} makes T's dims {dims} collide")
    for old, new in rename.items():
        if old not in st.dims:
            raise ValueError(f"contract: rename {old}->{new}, but {old} is not a dim of T (T has {st.dims})")
        if st.sizes.get(new, st.sizes[old]) != st.sizes[old]:
            raise ValueError(f"contract: rename {old}->{new} changes the size")
        st.sizes.setdefault(new, st.sizes[old])
    tdims = [d for d in dims if d not in bcast]
    # 2. einsum(T, w) -> out; letters not in out are summed
    letters = list(dict.fromkeys(dims + wdims))
    missing = [d for d in out if d not in letters]
    if missing:
        raise ValueError(f"contract: out dims {missing} appear in neither T {dims} nor w{k} {wdims}")
    summed = [d for d in letters if d not in out]
    # a summed letter that only T has, and only as a broadcast, is a constant factor, not a loop
    factor_dims = [d for d in summed if d in bcast and d not in wdims]
    loop_dims = [d for d in summed if d not in factor_dims]
    new_bcast = {d for d in out if d in bcast and d not in wdims}
    new_tdims = [d for d in out if d not in new_bcast]
    raxes = {d: te.reduce_axis((0, st.sizes[d]), name=f"r{d}") for d in loop_dims}
    factor = int(np.prod([st.sizes[d] for d in factor_dims])) if factor_dims else 1
    src = st.tensor

    def body(*vs):
        env = dict(zip(new_tdims, vs))
        env.update(raxes)
        val = src(*[env[d] for d in tdims]) * w(*[env[d] for d in wdims])
        if factor != 1:
            val = val * tirx.const(float(factor), st.dtype)
        if raxes:
            return te.sum(val, axis=list(raxes.values()))
        return val

    st.tensor = te.compute(st.shape(new_tdims), body, name=st._name(f"contract{k}"))
    st.dims, st.bcast = out, new_bcast


def program_to_te(program: Mapping[str, Any]) -> tuple[list[te.Tensor], te.Tensor]:
    """Stage-wise TE of a program: ``([x, w_0, ..., w_{m-1}], out)``, one te.compute per step."""
    sizes = _sizes(program)
    dtype = _dtype(program)
    in_dims = [int(d) for d in program["input"]["dims"]]
    x = te.placeholder([int(n) for n in program["input"]["shape"]], dtype, name="x")
    weights, wdims = [], []
    for k, spec in enumerate(program.get("weights", [])):
        weights.append(te.placeholder([int(n) for n in spec["shape"]], dtype, name=f"w{k}"))
        wdims.append([int(d) for d in spec["dims"]])
    st = _State(x, in_dims, sizes, dtype)
    for i, step in enumerate(program.get("steps", [])):
        op = step["op"]
        try:
            if op == "split":
                _step_split(st, step)
            elif op == "merge":
                _step_merge(st, step)
            elif op == "shift":
                _step_shift(st, step)
            elif op == "stride":
                _step_stride(st, step)
            elif op == "unfold":
                _step_unfold(st, step)
            elif op == "expand":
                _step_expand(st, step)
            elif op == "reduce":
                _step_reduce(st, step)
            elif op == "contract":
                _step_contract(st, step, weights, wdims)
            else:
                raise ValueError(f"unknown op {op!r}")
        except (KeyError, ValueError) as exc:
            raise ValueError(f"step {i} {step}: {exc}") from exc
    # (end) permute T to output.dims
    out_dims = [int(d) for d in program["output"]["dims"]]
    if sorted(out_dims) != sorted(st.dims):
        raise ValueError(f"T ends with dims {st.dims}, output wants {out_dims}")
    if st.tensor is x or st.bcast or st.tdims != out_dims:
        src, tdims = st.tensor, st.tdims

        def body(*vs):
            env = dict(zip(out_dims, vs))
            return src(*[env[d] for d in tdims])

        st.tensor = te.compute(st.shape(out_dims), body, name="out")
    out = st.tensor
    want = [int(n) for n in program["output"]["shape"]]
    got = [int(n) for n in out.shape]
    if got != want:
        raise ValueError(f"output shape {got} != program output shape {want}")
    return [x, *weights], out


# --------------------------------------------------------------------------------------------------
# fused lowering from program["expr"] (the oracle)
# --------------------------------------------------------------------------------------------------


def _divmod(op: str, a, c, analyzer):
    """floordiv / floormod, as selects when the bounds of ``a`` allow it.

    TVM 0.27 mis-lowers some nested floordiv/floormod index expressions: FlattenBuffer's IterMapSimplify
    turns ``floordiv(floormod(i, 4) + 1, 4)`` into 0 (the offset is dropped), so the oracle's
    ``mod(x + 1, n)`` (a SHIFT) feeding a ``div`` (a MERGE) computes wrong indices.  When
    ``0 <= a < 2c`` the quotient is 0 or 1 and a select is exact and opaque to that rewrite."""
    if analyzer is not None and isinstance(c, tirx.IntImm) and int(c) > 0:
        n = int(c)
        bound = analyzer.const_int_bound(a)
        lo, hi = int(bound.min_value), int(bound.max_value)
        if 0 <= lo and hi < n:
            return a if op == "mod" else tirx.const(0, _idx_dtype(a))
        if 0 <= lo and hi < 2 * n:
            if op == "mod":
                return tirx.Select(a < n, a, a - n)
            dt = _idx_dtype(a)
            return tirx.Select(a < n, tirx.const(0, dt), tirx.const(1, dt))
    return tirx.floordiv(a, c) if op == "div" else tirx.floormod(a, c)


def _eval_expr(e, its, reds, guards: list, analyzer=None):
    """JSON s-expression -> PrimExpr; ``pad`` guards are appended to ``guards``."""
    if isinstance(e, (int, np.integer)):
        return tirx.const(int(e), "int32")
    op = e[0]
    if op == "it":
        return its[int(e[1])]
    if op == "red":
        return reds[int(e[1])]
    if op == "const":
        return tirx.const(int(e[1]), "int32")
    if op in ("add", "sub"):
        a, b = _eval_expr(e[1], its, reds, guards, analyzer), _eval_expr(e[2], its, reds, guards, analyzer)
        return a + b if op == "add" else a - b
    if op in ("mul", "div", "mod"):
        a, c = _eval_expr(e[1], its, reds, guards, analyzer), _eval_expr(e[2], its, reds, guards, analyzer)
        if op == "mul":
            return a * c
        return _divmod(op, a, c, analyzer)
    if op == "pad":
        i = _eval_expr(e[1], its, reds, guards, analyzer)
        n = int(e[2])
        guards.append(tirx.all(i >= 0, i < n))
        return i
    raise ValueError(f"unknown expression {e!r}")


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


def fused_te(program: Mapping[str, Any]) -> tuple[list[te.Tensor], te.Tensor]:
    """A single te.compute from ``program["expr"]``:
    ``out[i] = SCALE * sum_r x[e_x(i, r)] * prod_k w_k[e_k(i, r)]`` (terms failing a pad guard are 0)."""
    ex = program["expr"]
    dtype = _dtype(program)
    x = te.placeholder([int(n) for n in program["input"]["shape"]], dtype, name="x")
    weights = [
        te.placeholder([int(n) for n in spec["shape"]], dtype, name=f"w{k}")
        for k, spec in enumerate(program.get("weights", []))
    ]
    red_sizes = [int(n) for n in ex.get("reductions", [])]
    mean = [bool(b) for b in ex.get("mean", [False] * len(red_sizes))]
    scale = 1.0
    for n, m in zip(red_sizes, mean):
        if m:
            scale /= n
    reds = [te.reduce_axis((0, n), name=f"r{j}") for j, n in enumerate(red_sizes)]

    it_sizes = [int(n) for n in ex["iterators"]]

    def body(*its):
        guards: list = []
        ana = _analyzer(its, reds, it_sizes, red_sizes)
        val = x(*[_eval_expr(e, its, reds, guards, ana) for e in ex["input"]])
        for w, es in zip(weights, ex.get("weights", [])):
            val = val * w(*[_eval_expr(e, its, reds, guards, ana) for e in es])
        if scale != 1.0:
            val = val * tirx.const(scale, dtype)
        val = _guarded(guards, val, dtype)
        return te.sum(val, axis=reds) if reds else val

    out = te.compute(it_sizes, body, name="out_fused")
    return [x, *weights], out


# --------------------------------------------------------------------------------------------------
# PrimFunc / build
# --------------------------------------------------------------------------------------------------


def _to_primfunc(inputs: list[te.Tensor], out: te.Tensor) -> tirx.PrimFunc:
    return te.create_prim_func([*inputs, out]).with_attr("global_symbol", "main")


def program_to_primfunc(program: Mapping[str, Any]) -> tirx.PrimFunc:
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
    elif isinstance(program_or_func, Mapping):
        func = program_to_primfunc(program_or_func)
    else:
        raise TypeError(f"expected a program dict, PrimFunc or IRModule, got {type(program_or_func)}")
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
            except Exception:  # pragma: no cover - depends on the GPU host
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
            raise TypeError(f"kernel takes {len(self.args) - 1} arrays (x and weights), got {len(ins)}")
        tins = []
        for a, (shape, dtype) in zip(ins, self.args[:-1]):
            a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
            if list(a.shape) != shape:
                raise ValueError(f"argument shape {list(a.shape)} != expected {shape}")
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
