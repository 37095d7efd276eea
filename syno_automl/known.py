"""Known operators built from primitives, each found by walking canonical children from the root.

Reaching one proves it is inside the search space: every step is a canonical child the search itself would
generate. Each function takes a space with the matching spec (see the docstrings) and returns an Operator.

Example:
    >>> from syno_automl import OperatorSpace
    >>> from syno_automl import known
    >>> space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]",
    ...     ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2"],
    ...     [{"N": 1, "C_in": 4, "C_out": 8, "H": 8, "W": 8}], max_depth=6)
    >>> known.conv2d(space).primitive_counts()["UNFOLD"]
    2
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from syno_automl import _native
from syno_automl.classify import classify
from syno_automl.echo import shown
from syno_automl.errors import OperatorFormatError
from syno_automl.ir.expr import evaluate_index as ir_evaluate_index
from syno_automl.space import Node, Operator, OperatorSpace

__all__ = ["walk", "conv2d", "depthwise_conv2d", "grouped_conv2d", "conv1d", "depthwise_conv1d", "grouped_conv1d",
           "pointwise_conv1d", "grouped_linear", "avg_pool2d", "pixel_shuffle", "linear", "opening", "classify"]


def _normalize(description: str) -> str:
    """A CONTRACTION's share and outer lists are sets: sort them so descriptions compare as sets.

    Other primitives' lists are ordered (SPLIT's [outer, inner], UNFOLD's [main, window]) and kept as is.
    """
    if not description.strip().startswith("CONTRACTION"):
        return description.strip()
    def sort_items(m: re.Match) -> str:
        items = [s.strip() for s in m.group(1).split(",") if s.strip()]
        return "[" + ", ".join(sorted(items)) + "]"
    return re.sub(r"\[([^\]]*)\]", sort_items, description.strip())


def evaluate_index(expr: Any, iterators: Sequence[int], reductions: Sequence[int] = ()) -> int | None:
    """Evaluates an IR index expression (docs/architecture.md §2); None where a padding guard fails."""
    value, ok = ir_evaluate_index(expr, iterators, reductions)
    return value if ok else None


def walk(space: OperatorSpace, steps: Sequence[str], check: Callable[[Operator], bool] | None = None) -> Operator:
    """Follows children whose description matches each step (bottom-up), then FINALIZE.

    Where several children match a step (equal sizes), every choice is tried, depth first, and the first
    operator that passes `check` is returned. Raises OperatorFormatError when none is reachable.
    """
    def search(node: Node, i: int) -> Operator | None:
        kids = node.children()
        if i == len(steps):
            for final in (c for c in kids if c.is_final):
                op = final.to_operator()
                if check is None or check(op):
                    return op
            return None
        wanted = _normalize(steps[i])
        for child in (c for c in kids if not c.is_final and _normalize(c.description) == wanted):
            found = search(child, i + 1)
            if found is not None:
                return found
        return None

    found = search(space.root(), 0)
    if found is None:
        raise OperatorFormatError(f"no canonical path {shown(list(steps))} reaches a final operator in this space")
    return found


def conv2d(space: OperatorSpace) -> Operator:
    """k×k convolution, same padding. Spec: [N, C_in, H, W] -> [N, C_out, H, W], coefficient k (odd).

    Weight layout: [C_out, C_in, kh, kw] (as torch's conv2d weight).
    """
    return walk(space, ["REDUCE C_in", "REDUCE k", "REDUCE k", "CONTRACTION share [C_in, k, k] outer [C_out]",
                        "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"])


def depthwise_conv2d(space: OperatorSpace) -> Operator:
    """Depthwise k×k convolution. Spec: [N, C, H, W] -> [N, C, H, W]. Weight layout: [C, kh, kw]."""
    return walk(space, ["REDUCE k", "REDUCE k", "CONTRACTION share [C, k, k] outer []",
                        "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"])


def grouped_conv2d(space: OperatorSpace, groups: str = "g") -> Operator:
    """Grouped k×k convolution with `groups` groups (a coefficient's name). Spec: [N, C_in, H, W] ->
    [N, C_out, H, W], coefficients k and `groups`.

    Weight layout: [g, C_out/g, C_in/g, kh, kw] (torch's [C_out, C_in/g, kh, kw] reshaped).
    """
    g = groups
    return walk(space, [f"REDUCE {g}^-1*C_in", "REDUCE k", "REDUCE k", f"MERGE [{g}, {g}^-1*C_out] -> C_out",
                        f"CONTRACTION share [{g}, {g}^-1*C_in, k, k] outer [{g}^-1*C_out]",
                        f"SPLIT C_in -> [{g}, {g}^-1*C_in]", "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"])


def conv1d(space: OperatorSpace) -> Operator:
    """k-wide 1-D convolution, same padding. Spec: [N, C_in, L] -> [N, C_out, L], coefficient k (odd).

    Weight layout: [C_out, C_in, k] (as torch's conv1d weight).
    """
    return walk(space, ["REDUCE C_in", "REDUCE k", "CONTRACTION share [C_in, k] outer [C_out]", "UNFOLD L -> [L, k]"])


def depthwise_conv1d(space: OperatorSpace) -> Operator:
    """Depthwise k-wide 1-D convolution. Spec: [N, C, L] -> [N, C, L]. Weight layout: [C, k]."""
    return walk(space, ["REDUCE k", "CONTRACTION share [C, k] outer []", "UNFOLD L -> [L, k]"])


def grouped_conv1d(space: OperatorSpace, groups: str = "g") -> Operator:
    """Grouped k-wide 1-D convolution with `groups` groups (a coefficient's name). Spec: [N, C_in, L] ->
    [N, C_out, L], coefficients k and `groups`.

    Weight layout: [g, C_out/g, C_in/g, k] (torch's [C_out, C_in/g, k] reshaped).
    """
    g = groups
    return walk(space, [f"REDUCE {g}^-1*C_in", "REDUCE k", f"MERGE [{g}, {g}^-1*C_out] -> C_out",
                        f"CONTRACTION share [{g}, {g}^-1*C_in, k] outer [{g}^-1*C_out]",
                        f"SPLIT C_in -> [{g}, {g}^-1*C_in]", "UNFOLD L -> [L, k]"])


def pointwise_conv1d(space: OperatorSpace) -> Operator:
    """Pointwise (kernel 1) convolution: every position's channels mixed by one [C_out, C_in] weight. Spec:
    [N, C_in, L] -> [N, C_out, L] (the same walk gives the 1x1 conv of a [N, C_in, H, W] spec).

    Weight layout: [C_out, C_in] (torch's conv1d weight [C_out, C_in, 1] without its last dim).
    """
    return walk(space, ["REDUCE C_in", "CONTRACTION share [C_in] outer [C_out]"])


def grouped_linear(space: OperatorSpace, groups: str = "g") -> Operator:
    """Block-diagonal dense layer with `groups` blocks (a coefficient's name). Spec: [N, C_in] -> [N, C_out].

    Weight layout: [g, C_out/g, C_in/g].
    """
    g = groups
    return walk(space, [f"REDUCE {g}^-1*C_in", f"MERGE [{g}, {g}^-1*C_out] -> C_out",
                        f"CONTRACTION share [{g}, {g}^-1*C_in] outer [{g}^-1*C_out]",
                        f"SPLIT C_in -> [{g}, {g}^-1*C_in]"])


def avg_pool2d(space: OperatorSpace) -> Operator:
    """Average pooling, kernel = stride = s. Spec: [N, C, H, W] -> [N, C, s^-1*H, s^-1*W], min_weights=0."""
    return walk(space, ["REDUCE s", "REDUCE s", "SPLIT H -> [s^-1*H, s]", "SPLIT W -> [s^-1*W, s]"])


def pixel_shuffle(space: OperatorSpace) -> Operator:
    """Pixel shuffle by s. Spec: [N, s^2*C, H, W] -> [N, C, s*H, s*W], min_weights=0."""
    def channel_order(op: Operator) -> bool:
        # channel = c * s^2 + (h_out mod s) * s + (w_out mod s): the H phase is the major one.
        p = op.program(0)
        s = p["output"]["shape"][2] // p["input"]["shape"][2]
        channel = p["expr"]["input"][1]
        return evaluate_index(channel, [0, 0, 1, 0]) == s and evaluate_index(channel, [0, 0, 0, 1]) == 1

    return walk(space, ["MERGE [H, s] -> s*H", "MERGE [W, s] -> s*W", "SPLIT s^2 -> [s, s]",
                        "SPLIT s^2*C -> [C, s^2]"], check=channel_order)


def linear(space: OperatorSpace) -> Operator:
    """Dense layer. Spec: [N, C_in] -> [N, C_out]. Weight layout: [C_out, C_in] (as torch's Linear)."""
    return walk(space, ["REDUCE C_in", "CONTRACTION share [C_in] outer [C_out]"])


# the replaced layer's grouped forms, most faithful first: a space that holds a grouped conv replaces a conv
_GROUPED_FORMS: tuple[tuple[str, Callable[[OperatorSpace, str], Operator]], ...] = (
    ("grouped conv2d", grouped_conv2d), ("grouped conv1d", grouped_conv1d), ("block-diagonal linear", grouped_linear))


def opening(space: OperatorSpace) -> list[tuple[str, Operator]]:
    """The replaced layer's grouped forms that `space` holds, as (label, operator): for each coefficient, the
    first of a grouped conv and a block-diagonal linear with that many groups that the space reaches and admits
    (its FLOPs and cost budgets); none where no coefficient divides the channels.

    Example:
        >>> from syno_automl import OperatorSpace
        >>> space = OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["s=2: 2"],
        ...     [{"N": 4, "C_in": 8, "C_out": 8}], max_depth=5)
        >>> [label for label, _ in opening(space)]
        ['block-diagonal linear, s groups']
    """
    found: list[tuple[str, Operator]] = []
    for spec in space.config()["coefficients"]:
        name = _native.parse_spec(spec)["name"]
        for label, form in _GROUPED_FORMS:
            try:
                op = form(space, name)
            except OperatorFormatError:
                continue
            if all(op.hash != other.hash for _, other in found):
                found.append((f"{label}, {name} groups", op))
            break
    return found
