"""FLOPs of a program by the rule of docs/architecture.md §2, as a step backend.

contract = 2 · Π sizes of all its letters (one multiply and one add per point); reduce = numel(T) additions;
views = 0. Broadcast dims count as ordinary dims of T, whether or not a generator stores them. The steps counted are
the planned ones, with the planner's products of weights (a ``contract`` among a weight's views); the paper's
count of the canonical order is the program's ``flops``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from syno_automl.ir.program import Contract, Program, Reduce
from syno_automl.ir.walk import StepBackend, Transition, walk, weight_order, weight_program

__all__ = ["FlopCount", "count_flops"]


class FlopCount(StepBackend):
    def __init__(self, program: Program) -> None:
        self.p = program
        self.total = 0

    def view(self, tr: Transition) -> None:
        pass

    def reduce(self, tr: Transition[Reduce]) -> None:
        self.total += self.p.numel(tr.pre.dims)

    def contract(self, tr: Transition[Contract]) -> None:
        assert tr.contract is not None  # advance resolves every contract step
        self.total += 2 * self.p.numel(tr.contract.letters)

    STEPS = {"split": view, "merge": view, "shift": view, "stride": view, "unfold": view, "expand": view,
             "reduce": reduce, "contract": contract}


def count_flops(program: Mapping[str, Any] | Program) -> int:
    """FLOPs of ``program`` (a dict or a parsed Program)."""
    from syno_automl.ir.parse import parse

    p = parse(program)
    backend = FlopCount(p)
    walk(p, backend)
    for k in weight_order(p):  # the planner's products of weights (their views cost nothing)
        walk(weight_program(p, k), backend)
    return backend.total
