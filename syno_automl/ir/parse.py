"""Parse and validate a program dict (docs/architecture.md §2) into a :class:`~syno_automl.ir.Program`, once.

Strict on the documented keys (types, arities, dim ids, sizes, expression shapes: an :class:`IRError` names the
key at fault), tolerant of keys it does not know (kept in ``Program.extra``, never an error), so the native
lowering can add fields without breaking its consumers. JSON's string keys (``sizes``, ``rename``) are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from syno_automl.echo import shown
from syno_automl.ir.errors import IRError
from syno_automl.ir.expr import parse_expr
from syno_automl.ir.program import (
    STEP_OPS,
    WEIGHT_VIEW_OPS,
    Contract,
    Expand,
    Merge,
    Oracle,
    Program,
    Reduce,
    Shift,
    Split,
    Step,
    Stride,
    Tensor,
    Unfold,
)
from syno_automl.ir.walk import walk, weight_order

__all__ = ["parse", "oracle", "KNOWN_KEYS"]

KNOWN_KEYS = ("input", "weights", "output", "sizes", "steps", "free_dims", "flops", "params", "expr", "dtype")


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        if isinstance(v, str) and v.lstrip("-").isdigit():  # a JSON object key
            return int(v)
        raise IRError(f"{where}: expected an integer, got {shown(v)}")
    return int(v)


def _ints(v: Any, where: str, length: int | None = None) -> tuple[int, ...]:
    if not isinstance(v, (list, tuple)):
        raise IRError(f"{where}: expected a list of integers, got {shown(v)}")
    if length is not None and len(v) != length:
        raise IRError(f"{where}: expected {length} integers, got {shown(v)}")
    return tuple(_int(x, where) for x in v)


def _pair(v: Any, where: str) -> tuple[int, int]:
    a, b = _ints(v, where, 2)
    return a, b


def _get(d: Mapping, key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise IRError(f"{where}: expected a dict, got {type(d).__name__}")
    if key not in d:
        raise IRError(f"{where}: missing key {shown(key)}")
    return d[key]


def _int_map(v: Any, where: str) -> dict[int, int]:
    if v is None:
        return {}
    items = v.items() if isinstance(v, Mapping) else v
    try:
        return {_int(a, where): _int(b, where) for a, b in items}
    except (TypeError, ValueError) as e:
        if isinstance(e, IRError):
            raise
        raise IRError(f"{where}: expected a dict of integers, got {shown(v)}") from None


def _tensor(d: Any, where: str, weight: bool = False) -> Tensor:
    dims = _ints(_get(d, "dims", where), f"{where}.dims")
    shape = _ints(_get(d, "shape", where), f"{where}.shape")
    if len(dims) != len(shape):
        raise IRError(f"{where}: dims {shown(list(dims))} and shape {shown(list(shape))} differ in length")
    if len(set(dims)) != len(dims):
        raise IRError(f"{where}: duplicate dims {shown(list(dims))}")
    if any(s < 1 for s in shape):
        raise IRError(f"{where}: sizes must be positive, got {shown(list(shape))}")
    fan_in = None
    if weight and d.get("fan_in") is not None:
        f = d["fan_in"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) and not hasattr(f, "__float__"):
            raise IRError(f"{where}.fan_in: expected a number, got {shown(f)}")
        fan_in = float(f)
    views: tuple[Step, ...] = ()
    if weight and d.get("views") is not None:
        vs = d["views"]
        if not isinstance(vs, (list, tuple)):
            raise IRError(f"{where}.views: expected a list of view steps, got {type(vs).__name__}")
        views = tuple(_step(v, f"{where}.views[{i}]") for i, v in enumerate(vs))
        for i, v in enumerate(views):
            if v.op not in WEIGHT_VIEW_OPS:
                raise IRError(f"{where}.views[{i}]: {shown(v.op)} is not a view of a weight "
                              f"({', '.join(WEIGHT_VIEW_OPS)})")
    return Tensor(dims, shape, fan_in, views)


def _step(d: Any, where: str) -> Step:
    op = _get(d, "op", where)
    if op not in STEP_OPS:
        raise IRError(f"{where}: unknown step op {shown(op)} (known: {', '.join(STEP_OPS)})")
    w = f"{where} ({op})"
    if op == "split":
        return Split(_int(_get(d, "src", w), w), _pair(_get(d, "dst", w), w))
    if op == "merge":
        return Merge(_pair(_get(d, "src", w), w), _int(_get(d, "dst", w), w))
    if op == "shift":
        return Shift(_int(_get(d, "src", w), w), _int(_get(d, "dst", w), w))
    if op == "stride":
        return Stride(_int(_get(d, "src", w), w), _int(_get(d, "dst", w), w), _int(_get(d, "stride", w), w))
    if op == "unfold":
        return Unfold(_int(_get(d, "src", w), w), _pair(_get(d, "dst", w), w), _int(_get(d, "window", w), w))
    if op == "expand":
        return Expand(_int(_get(d, "dst", w), w))
    if op == "reduce":
        mean = d.get("mean", False)
        if not isinstance(mean, (bool, int)):
            raise IRError(f"{w}.mean: expected a bool, got {shown(mean)}")
        return Reduce(_int(_get(d, "src", w), w), bool(mean))
    rename = tuple(_int_map(d.get("rename"), f"{w}.rename").items())
    return Contract(_int(_get(d, "weight", w), w), rename, _ints(_get(d, "out", w), f"{w}.out"))


def _oracle(d: Any) -> Oracle:
    """The expressions, strictly in form; their counts against the tensors are checked by :func:`oracle`
    (a step-only consumer does not need them, and a hand-edited program may carry stale ones)."""
    its = _ints(_get(d, "iterators", "expr"), "expr.iterators")
    reds = _ints(_get(d, "reductions", "expr"), "expr.reductions")
    mean = d.get("mean", [False] * len(reds))
    if not isinstance(mean, (list, tuple)) or len(mean) != len(reds):
        raise IRError(f"expr.mean: expected {len(reds)} bools (one per reduction), got {shown(mean)}")
    kw = {"iterators": len(its), "reductions": len(reds)}
    ins = _get(d, "input", "expr")
    ws = _get(d, "weights", "expr")
    if not isinstance(ins, (list, tuple)) or not isinstance(ws, (list, tuple)) \
            or not all(isinstance(es, (list, tuple)) for es in ws):
        raise IRError("expr.input / expr.weights: expected lists of expressions")
    wexprs = tuple(tuple(parse_expr(e, f"expr.weights[{k}][{j}]", **kw) for j, e in enumerate(es))
                   for k, es in enumerate(ws))
    return Oracle(its, reds, tuple(bool(m) for m in mean),
                  tuple(parse_expr(e, f"expr.input[{j}]", **kw) for j, e in enumerate(ins)), wexprs)


def oracle(program: Program) -> Oracle:
    """``program.expr``, checked against the tensors (one expression per dim, iterators = output shape)."""
    ex = program.expr
    if ex is None:
        raise IRError("the program has no 'expr' (the oracle of docs/architecture.md §1)")
    if len(ex.input) != len(program.input.dims):
        raise IRError(f"expr.input: {len(ex.input)} expressions for the {len(program.input.dims)}-d input")
    if len(ex.weights) != len(program.weights):
        raise IRError(f"expr.weights: {len(ex.weights)} lists for {len(program.weights)} weights")
    for k, (es, t) in enumerate(zip(ex.weights, program.weights)):
        if len(es) != len(t.dims):
            raise IRError(f"expr.weights[{k}]: {len(es)} expressions for the {len(t.dims)}-d weight w{k}")
    if tuple(ex.iterators) != tuple(program.output.shape):
        raise IRError(f"expr.iterators {shown(list(ex.iterators))} differ from the output shape "
                      f"{shown(list(program.output.shape))}")
    return ex


def parse(program: Mapping[str, Any] | Program) -> Program:
    """The typed, validated program (a Program passes through). Raises :class:`IRError` (a ValueError)."""
    if isinstance(program, Program):
        return program
    if not isinstance(program, Mapping):
        raise IRError(f"a program is a dict (docs/architecture.md §2), got {type(program).__name__}")
    inp = _tensor(_get(program, "input", "program"), "input")
    out = _tensor(_get(program, "output", "program"), "output")
    ws = program.get("weights", [])
    if not isinstance(ws, (list, tuple)):
        raise IRError(f"weights: expected a list, got {type(ws).__name__}")
    weights = tuple(_tensor(w, f"weights[{k}]", weight=True) for k, w in enumerate(ws))
    sizes = _int_map(program.get("sizes", {}), "sizes")
    for name, t in [("input", inp), ("output", out), *((f"weights[{k}]", w) for k, w in enumerate(weights))]:
        for d, n in zip(t.dims, t.shape):
            if sizes.setdefault(d, n) != n:
                raise IRError(f"{name}: dim {d} has size {n}, but sizes says {sizes[d]}")
    steps_in = _get(program, "steps", "program")
    if not isinstance(steps_in, (list, tuple)):
        raise IRError(f"steps: expected a list, got {type(steps_in).__name__}")
    steps = tuple(_step(st, f"step {i}") for i, st in enumerate(steps_in))
    for st in steps:  # a rename target is a weight dim; take the source's size if the dict lacks it
        if isinstance(st, Contract):
            for a, b in st.rename:
                if a in sizes:
                    sizes.setdefault(b, sizes[a])
    free = _ints(program.get("free_dims", []), "free_dims")
    for d in free:
        if d not in sizes:
            raise IRError(f"free_dims: dim {d} has no size")
        for k, w in enumerate(weights):
            if d in w.dims:
                raise IRError(f"weights[{k}]: dim {d} is free (run-time sized); a weight cannot have one")
    counts = {}
    for key in ("flops", "params"):
        v = program.get(key)
        counts[key] = None if v is None else _int(v, key)
    expr = program.get("expr")
    oracle_ = None if expr is None else _oracle(expr)
    dtype = program.get("dtype", "float32")
    if not isinstance(dtype, str):
        raise IRError(f"dtype: expected a string, got {shown(dtype)}")
    extra = {k: v for k, v in program.items() if k not in KNOWN_KEYS}
    p = Program(inp, weights, out, sizes, steps, free, counts["flops"], counts["params"], oracle_, dtype, extra)
    weight_order(p)  # products of weights: no cycle, no unknown weight
    walk(p)  # dims and sizes of every step, and T's dims at the end
    return p
