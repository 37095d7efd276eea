"""Index expressions of the kernel IR (docs/architecture.md §2): typed nodes, parsed once, and one fold.

An expression is a tree of :class:`Expr` nodes. Leaves: ``it j`` (output iterator j), ``red j`` (reduction
variable j), ``const c``. Inner nodes: ``add``/``sub`` (two children), ``mul``/``div``/``mod`` (one child and
an integer ``value``: floor division and floor modulo) and ``pad`` (one child and the bound ``value``: the term
is 0 unless ``0 <= child < value``; the index is the child).

A backend evaluates an expression by :func:`fold` with one table (op -> handler); :data:`EXPR_OPS` lists the
ops every table must cover (tests/ir/test_ir.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from syno_automl.echo import shown
from syno_automl.ir.errors import IRError

__all__ = ["EXPR_OPS", "LEAF_OPS", "Expr", "parse_expr", "fold", "iter_nodes", "index_table", "evaluate_index"]

LEAF_OPS = ("it", "red", "const")
BINARY_OPS = ("add", "sub")
SCALED_OPS = ("mul", "div", "mod", "pad")  # one child and an integer
EXPR_OPS = LEAF_OPS + BINARY_OPS + SCALED_OPS

V = TypeVar("V")


@dataclass(frozen=True)
class Expr:
    """One node. ``value``: the leaf's index or constant, or the integer of mul/div/mod/pad (0 for add/sub)."""

    op: str
    args: tuple[Expr, ...] = ()
    value: int = 0

    def to_json(self) -> list:
        """The JSON s-expression form of the native dict."""
        if self.op in LEAF_OPS:
            return [self.op, self.value]
        if self.op in BINARY_OPS:
            return [self.op, self.args[0].to_json(), self.args[1].to_json()]
        return [self.op, self.args[0].to_json(), self.value]

    def __str__(self) -> str:
        if self.op == "it":
            return f"i{self.value}"
        if self.op == "red":
            return f"r{self.value}"
        if self.op == "const":
            return str(self.value)
        if self.op in BINARY_OPS:
            return f"({self.args[0]} {'+' if self.op == 'add' else '-'} {self.args[1]})"
        sym = {"mul": "*", "div": "//", "mod": "%"}.get(self.op)
        if sym:
            return f"({self.args[0]} {sym} {self.value})"
        return f"pad({self.args[0]}, {self.value})"


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):  # ints and numpy ints, not floats
        raise IRError(f"{where}: expected an integer, got {shown(v)}")
    return int(v)


def parse_expr(e: Any, where: str = "expression", *, iterators: int | None = None,
               reductions: int | None = None) -> Expr:
    """JSON s-expression -> :class:`Expr`, strictly: unknown ops, wrong arity, non-integer constants and
    (when the counts are given) leaf indices out of range raise :class:`IRError` naming ``where``."""
    if not isinstance(e, (list, tuple)) or not e or not isinstance(e[0], str):
        raise IRError(f"{where}: expected an s-expression [op, ...], got {shown(e)}")
    op = e[0]
    if op in LEAF_OPS:
        if len(e) != 2:
            raise IRError(f"{where}: {shown(op)} takes one integer, got {shown(e)}")
        v = _int(e[1], where)
        bound = iterators if op == "it" else reductions if op == "red" else None
        if bound is not None and not 0 <= v < bound:
            raise IRError(f"{where}: {op} {v} out of range (there are {bound})")
        return Expr(op, (), v)
    kw = {"iterators": iterators, "reductions": reductions}
    if op in BINARY_OPS:
        if len(e) != 3:
            raise IRError(f"{where}: {shown(op)} takes two expressions, got {shown(e)}")
        return Expr(op, (parse_expr(e[1], where, **kw), parse_expr(e[2], where, **kw)))
    if op in SCALED_OPS:
        if len(e) != 3:
            raise IRError(f"{where}: {shown(op)} takes an expression and an integer, got {shown(e)}")
        c = _int(e[2], where)
        if op in ("div", "mod", "pad") and c <= 0:
            raise IRError(f"{where}: {op} by {c} (must be positive)")
        return Expr(op, (parse_expr(e[1], where, **kw),), c)
    raise IRError(f"{where}: unknown expression op {shown(op)} (known: {', '.join(EXPR_OPS)})")


def fold(e: Expr, table: Mapping[str, Callable[..., V]]) -> V:
    """Evaluate ``e`` bottom-up: ``table[op](node, *folded children)``; one handler per op of EXPR_OPS."""
    try:
        handler = table[e.op]
    except KeyError:
        raise IRError(f"no handler for expression op {shown(e.op)} in this backend") from None
    return handler(e, *(fold(a, table) for a in e.args))


def iter_nodes(e: Expr):
    """Every node of ``e``, parents first."""
    yield e
    for a in e.args:
        yield from iter_nodes(a)


def index_table(its: Sequence[int] = (), reds: Sequence[int] = ()) -> dict[str, Callable[..., tuple[int, bool]]]:
    """The integer backend: op -> handler on (index, every pad guard holds) pairs."""
    return {
        "it": lambda node: (int(its[node.value]), True),
        "red": lambda node: (int(reds[node.value]), True),
        "const": lambda node: (node.value, True),
        "add": lambda node, a, b: (a[0] + b[0], a[1] and b[1]),
        "sub": lambda node, a, b: (a[0] - b[0], a[1] and b[1]),
        "mul": lambda node, a: (a[0] * node.value, a[1]),
        "div": lambda node, a: (a[0] // node.value, a[1]),
        "mod": lambda node, a: (a[0] % node.value, a[1]),
        "pad": lambda node, a: (a[0], a[1] and 0 <= a[0] < node.value),
    }


def evaluate_index(e: Expr | Any, its: Sequence[int], reds: Sequence[int] = ()) -> tuple[int, bool]:
    """(index, guards hold) of one expression (an Expr or its JSON form) at integer iterators / reductions."""
    node = e if isinstance(e, Expr) else parse_expr(e)
    return fold(node, index_table(its, reds))
