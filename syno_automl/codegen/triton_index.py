"""Index expressions of the kernel IR (``program.expr``, docs/architecture.md §1-2) as Triton index arithmetic.

One table from expression op to handler (:data:`EXPR_OPS` of ``syno_automl.ir``), folded bottom-up by
``ir.fold``. Each node becomes a :class:`Code`: its text (a Triton expression over the kernel's index vectors),
and the interval of values it takes where the term is not masked, so that

* a ``pad`` guard that cannot fail (UNFOLD's window inside the data) emits no mask,
* a ``mod`` whose operand already lies in ``[0, n)`` emits nothing,
* ``div`` / ``mod`` of an operand that may be negative stay *floor* operations (the IR's semantics) although
  Triton's ``//`` and ``%`` truncate toward zero: the operand is shifted by a multiple of the divisor first.

SHIFT becomes ``mod``, UNFOLD an offset plus a guard (a load mask), STRIDE a multiply, SPLIT/MERGE div/mod.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from syno_automl.ir import Expr, fold

__all__ = ["Code", "INT_MAX", "code_table", "index_code", "interval"]

INT_MAX = 2**31 - 1  # the upper bound of a run-time sized iterator (the batch)


@dataclass(frozen=True)
class Code:
    """A Triton expression and the interval ``[lo, hi]`` of its values where the term counts."""

    text: str
    lo: int
    hi: int


def _shift_for(lo: int, c: int) -> int:
    """The least multiple of ``c`` that makes ``lo`` non-negative."""
    return -(lo // c) * c if lo < 0 else 0


def _mul(node: Expr, a: Code) -> Code:
    c = node.value
    lo, hi = sorted((a.lo * c, a.hi * c))
    return Code(a.text if c == 1 else f"({a.text} * {c})", lo, hi)


def _div(node: Expr, a: Code) -> Code:
    c = node.value
    if c == 1:
        return a
    k = _shift_for(a.lo, c)
    text = f"({a.text} // {c})" if not k else f"(({a.text} + {k}) // {c} - {k // c})"
    return Code(text, a.lo // c, a.hi // c)


def _mod(node: Expr, a: Code) -> Code:
    c = node.value
    if 0 <= a.lo and a.hi < c:  # already in range: floor mod is the identity
        return a
    k = _shift_for(a.lo, c)
    text = f"({a.text} % {c})" if not k else f"(({a.text} + {k}) % {c})"
    lo, hi = (a.lo % c, a.hi % c) if a.hi - a.lo < c and a.lo % c <= a.hi % c else (0, c - 1)
    return Code(text, lo, hi)


def code_table(names: Callable[[str, int], str], sizes: Callable[[str, int], int],
               guards: list[str]) -> dict[str, Callable[..., Code]]:
    """The Triton backend of the expression fold: op -> handler on :class:`Code` children.

    ``names(kind, j)`` is the text of iterator (``"it"``) or reduction (``"red"``) ``j`` in the tile being
    indexed (e.g. ``"i3[:, None]"``), ``sizes(kind, j)`` its extent (``INT_MAX + 1`` when run-time sized).
    ``pad`` appends its condition to ``guards`` (and/ed into the load's mask) unless it always holds."""

    def leaf(node: Expr) -> Code:
        return Code(names(node.op, node.value), 0, sizes(node.op, node.value) - 1)

    def pad(node: Expr, a: Code) -> Code:
        n = node.value
        conds = ([f"({a.text} >= 0)"] if a.lo < 0 else []) + ([f"({a.text} < {n})"] if a.hi >= n else [])
        guards.extend(conds)
        # where the term counts the index lies in [0, n): later div/mod may rely on it
        return Code(a.text, max(a.lo, 0), min(a.hi, n - 1))

    return {
        "it": leaf,
        "red": leaf,
        "const": lambda node: Code(str(node.value), node.value, node.value),
        "add": lambda node, a, b: Code(f"({a.text} + {b.text})", a.lo + b.lo, a.hi + b.hi),
        "sub": lambda node, a, b: Code(f"({a.text} - {b.text})", a.lo - b.hi, a.hi - b.lo),
        "mul": _mul,
        "div": _div,
        "mod": _mod,
        "pad": pad,
    }


def index_code(exprs: Sequence[Expr], strides: Sequence[str], names: Callable[[str, int], str],
               sizes: Callable[[str, int], int]) -> tuple[str, list[str]]:
    """The element offset ``Σ_d e_d · stride_d`` of one tensor's index expressions, and the guards (mask terms)
    under which the term is not zero."""
    guards: list[str] = []
    table = code_table(names, sizes, guards)
    terms = []
    for e, s in zip(exprs, strides):
        c = fold(e, table)
        if c.lo == c.hi == 0:
            continue  # a coordinate of size 1: contributes nothing
        terms.append(f"{c.text} * {s}")
    return (" + ".join(terms) if terms else "0"), guards


def interval(e: Expr, sizes: Callable[[str, int], int]) -> tuple[int, int]:
    """The interval of ``e``'s values where the term counts (used to tell which guards can fail)."""
    c = fold(e, code_table(lambda kind, j: f"{kind}{j}", sizes, []))
    return c.lo, c.hi
