"""Reference evaluator of the operator oracle (docs/architecture.md §1) for tests: an expression backend of the IR.

``program["expr"]`` (parsed by ``syno_automl.ir``) gives, for the input and each weight, one index expression
per tensor dim over the output iterators ``i_j`` (sizes ``expr.iterators``, in output-dim order) and the
reductions ``r_j`` (sizes ``expr.reductions``):

    out[i] = SCALE * sum_r x[e_x(i, r)] * prod_k w_k[e_k(i, r)]      (terms whose guards fail are 0)

with ``SCALE = 1 / prod |r_j|`` over the reductions flagged in ``expr.mean``.

One table (``EXPR``: op -> handler on (index, guard) pairs) evaluates the expressions, whatever the leaves are:
``evaluate_reference`` gives the leaves as numpy ``arange``s broadcast over the full (iterators x reductions)
grid; ``evaluate_reference_loops`` (the literal nested-loop version, tiny sizes only) and ``eval_index`` give
them as Python ints. Both work in float64 and only on the nominal sizes of ``expr``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from syno_automl.ir import Expr, fold, oracle, parse, parse_expr

__all__ = ["evaluate_reference", "evaluate_reference_loops", "eval_index", "EXPR"]

TRUE = np.True_


def _leaf(values: Sequence):
    return lambda node: (values[node.value], TRUE)


# op -> handler(node, *(index, guard) of the children) -> (index, guard)
EXPR_BASE = {
    "const": lambda node: (node.value, TRUE),
    "add": lambda node, a, b: (a[0] + b[0], a[1] & b[1]),
    "sub": lambda node, a, b: (a[0] - b[0], a[1] & b[1]),
    "mul": lambda node, a: (a[0] * node.value, a[1]),
    "div": lambda node, a: (a[0] // node.value, a[1]),
    "mod": lambda node, a: (a[0] % node.value, a[1]),
    "pad": lambda node, a: (a[0], a[1] & (a[0] >= 0) & (a[0] < node.value)),
}


def table(its: Sequence, reds: Sequence) -> dict:
    """The full table for given leaf values (``it j`` -> its[j], ``red j`` -> reds[j])."""
    return {"it": _leaf(its), "red": _leaf(reds), **EXPR_BASE}


EXPR = table((), ())  # for tests/ir/test_ir.py: the ops this backend covers


def _as_numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):  # torch.Tensor
        t = t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


def eval_index(e: Sequence | Expr, it: Sequence[int], red: Sequence[int]) -> tuple[int, bool]:
    """Scalar evaluation of an index expression: (index, guard ok)."""
    node = e if isinstance(e, Expr) else parse_expr(e)
    v, g = fold(node, table([int(i) for i in it], [int(r) for r in red]))
    return int(v), bool(g)


def _grid_leaves(its: list[int], reds: list[int]) -> tuple[list, list]:
    n = len(its) + len(reds)

    def axis(j: int, size: int) -> np.ndarray:
        shape = [1] * n
        shape[j] = size
        return np.arange(size).reshape(shape)

    return ([axis(j, s) for j, s in enumerate(its)], [axis(len(its) + j, s) for j, s in enumerate(reds)])


def _gather(a: np.ndarray, exprs: Sequence[Expr], tab: dict, full: tuple[int, ...], what: str) -> np.ndarray:
    if len(exprs) != a.ndim:
        raise ValueError(f"{what}: {len(exprs)} index expressions for a {a.ndim}-d tensor")
    mask = np.ones(full, dtype=bool)
    idx = []
    for e in exprs:
        v, m = fold(e, tab)
        mask = mask & m
        idx.append(np.broadcast_to(v, full))
    safe = []
    for k, v in enumerate(idx):
        v = np.where(mask, v, 0)
        if ((v < 0) | (v >= a.shape[k])).any():
            raise IndexError(f"{what}: unguarded index out of range on dim {k} (size {a.shape[k]})")
        safe.append(v)
    return np.where(mask, a[tuple(safe)], 0.0)


def evaluate_reference(program: dict, x: Any, weights: Sequence[Any] = ()) -> np.ndarray:
    """Evaluate ``program["expr"]`` on ``x`` and ``weights`` (numpy arrays or torch tensors, in the program's
    layouts) in float64; returns an array of shape ``expr["iterators"]`` (= the output shape)."""
    ex = oracle(parse(program))
    its, reds = list(ex.iterators), list(ex.reductions)
    weights = list(weights)
    if len(weights) != len(ex.weights):
        raise ValueError(f"{len(weights)} weights given, expr has {len(ex.weights)}")
    tab = table(*_grid_leaves(its, reds))
    full = tuple(its) + tuple(reds)
    term = _gather(_as_numpy(x), ex.input, tab, full, "input")
    for k, (w, ew) in enumerate(zip(weights, ex.weights)):
        term = term * _gather(_as_numpy(w), ew, tab, full, f"weight {k}")
    out = term.sum(axis=tuple(range(len(its), len(its) + len(reds)))) if reds else term
    return np.asarray(out * ex.scale, dtype=np.float64).reshape(its)


def evaluate_reference_loops(program: dict, x: Any, weights: Sequence[Any] = ()) -> np.ndarray:
    """Same as ``evaluate_reference`` with plain nested Python loops (tiny sizes only)."""
    ex = oracle(parse(program))
    xs = _as_numpy(x)
    ws = [_as_numpy(w) for w in weights]
    out = np.zeros(ex.iterators, dtype=np.float64)
    for it in itertools.product(*[range(s) for s in ex.iterators]):
        acc = 0.0
        for red in itertools.product(*[range(s) for s in ex.reductions]):
            tab = table(it, red)
            term = 1.0
            for a, exprs in [(xs, ex.input)] + list(zip(ws, ex.weights)):
                pairs = [fold(e, tab) for e in exprs]
                if not all(g for _, g in pairs):
                    term = 0.0
                    break
                idx = tuple(int(v) for v, _ in pairs)
                if any(not 0 <= v < n for v, n in zip(idx, a.shape)):
                    raise IndexError(f"unguarded index {idx} out of range for shape {a.shape}")
                term *= a[idx]
            acc += term
        out[it] = acc * ex.scale
    return out
