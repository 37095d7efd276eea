"""Reference evaluator of the operator oracle (docs/architecture.md §1) for tests.

``program["expr"]`` gives, for the input and each weight, one index expression per tensor dim over the
output iterators ``i_j`` (sizes ``expr["iterators"]``, in output-dim order) and the reductions ``r_j``
(sizes ``expr["reductions"]``):

    out[i] = SCALE * sum_r x[e_x(i, r)] * prod_k w_k[e_k(i, r)]      (terms whose guards fail are 0)

with ``SCALE = 1 / prod |r_j|`` over the reductions flagged in ``expr["mean"]``.

``evaluate_reference`` evaluates this with numpy broadcasting over the full (iterators x reductions) grid;
``evaluate_reference_loops`` is the literal nested-loop version (slow; for cross-checking on tiny sizes).
Both work in float64 and only on the nominal sizes of ``expr``.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

__all__ = ["evaluate_reference", "evaluate_reference_loops", "eval_index"]


def _as_numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):  # torch.Tensor
        t = t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


def _expr_parts(program: dict):
    expr = program["expr"]
    its = [int(s) for s in expr["iterators"]]
    reds = [int(s) for s in expr["reductions"]]
    mean = [bool(m) for m in expr.get("mean", [False] * len(reds))]
    if len(mean) != len(reds):
        raise ValueError("expr: 'mean' and 'reductions' differ in length")
    scale = 1.0
    for size, m in zip(reds, mean):
        if m:
            scale /= size
    return expr, its, reds, scale


def eval_index(e: Sequence, it: Sequence[int], red: Sequence[int]) -> tuple[int, bool]:
    """Scalar evaluation of an index expression: (index, guard ok)."""
    op = e[0]
    if op == "it":
        return int(it[e[1]]), True
    if op == "red":
        return int(red[e[1]]), True
    if op == "const":
        return int(e[1]), True
    if op in ("add", "sub"):
        a, ga = eval_index(e[1], it, red)
        b, gb = eval_index(e[2], it, red)
        return (a + b if op == "add" else a - b), ga and gb
    if op in ("mul", "div", "mod"):
        a, ga = eval_index(e[1], it, red)
        c = int(e[2])
        return {"mul": a * c, "div": a // c, "mod": a % c}[op], ga
    if op == "pad":
        a, ga = eval_index(e[1], it, red)
        return a, ga and 0 <= a < int(e[2])
    raise ValueError(f"unknown index expression {e!r}")


def _eval_grid(e: Sequence, its: list[int], reds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized evaluation on the broadcast grid: (index array, guard mask)."""
    n = len(its) + len(reds)
    op = e[0]
    if op in ("it", "red"):
        axis = int(e[1]) + (0 if op == "it" else len(its))
        size = (its if op == "it" else reds)[int(e[1])]
        shape = [1] * n
        shape[axis] = size
        return np.arange(size).reshape(shape), np.ones([1] * n, dtype=bool)
    if op == "const":
        return np.full([1] * n, int(e[1])), np.ones([1] * n, dtype=bool)
    if op in ("add", "sub"):
        a, ma = _eval_grid(e[1], its, reds)
        b, mb = _eval_grid(e[2], its, reds)
        return (a + b if op == "add" else a - b), ma & mb
    if op in ("mul", "div", "mod"):
        a, ma = _eval_grid(e[1], its, reds)
        c = int(e[2])
        return {"mul": a * c, "div": a // c, "mod": a % c}[op], ma
    if op == "pad":
        a, ma = _eval_grid(e[1], its, reds)
        return a, ma & (a >= 0) & (a < int(e[2]))
    raise ValueError(f"unknown index expression {e!r}")


def _gather(a: np.ndarray, exprs: list, its: list[int], reds: list[int], what: str) -> np.ndarray:
    if len(exprs) != a.ndim:
        raise ValueError(f"{what}: {len(exprs)} index expressions for a {a.ndim}-d tensor")
    full = tuple(its) + tuple(reds)
    mask = np.ones(full, dtype=bool)
    idx = []
    for e in exprs:
        v, m = _eval_grid(e, its, reds)
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
    expr, its, reds, scale = _expr_parts(program)
    weights = list(weights)
    if len(weights) != len(expr["weights"]):
        raise ValueError(f"{len(weights)} weights given, expr has {len(expr['weights'])}")
    term = _gather(_as_numpy(x), expr["input"], its, reds, "input")
    for k, (w, ew) in enumerate(zip(weights, expr["weights"])):
        term = term * _gather(_as_numpy(w), ew, its, reds, f"weight {k}")
    out = term.sum(axis=tuple(range(len(its), len(its) + len(reds)))) if reds else term
    return np.asarray(out * scale, dtype=np.float64).reshape(its)


def evaluate_reference_loops(program: dict, x: Any, weights: Sequence[Any] = ()) -> np.ndarray:
    """Same as ``evaluate_reference`` with plain nested Python loops (tiny sizes only)."""
    expr, its, reds, scale = _expr_parts(program)
    xs = _as_numpy(x)
    ws = [_as_numpy(w) for w in weights]
    out = np.zeros(its, dtype=np.float64)
    for it in itertools.product(*[range(s) for s in its]):
        acc = 0.0
        for red in itertools.product(*[range(s) for s in reds]):
            term = 1.0
            for a, exprs in [(xs, expr["input"])] + list(zip(ws, expr["weights"])):
                idx = []
                ok = True
                for e in exprs:
                    v, g = eval_index(e, it, red)
                    ok = ok and g
                    idx.append(v)
                if not ok:
                    term = 0.0
                    break
                if any(not 0 <= v < n for v, n in zip(idx, a.shape)):
                    raise IndexError(f"unguarded index {idx} out of range for shape {a.shape}")
                term *= a[tuple(idx)]
            acc += term
        out[it] = acc * scale
    return out
