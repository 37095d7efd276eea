"""Initial weight scales derived from the program, as a step backend (issue 10, item 6).

Goal: at initialization the operator's output has the variance of the layer it replaces, initialized by torch's
default. ``nn.Conv2d`` and ``nn.Linear`` draw ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (kaiming_uniform with
a = sqrt(5)), i.e. Var(w) = 1 / (3 fan_in), so their output variance is E[x^2] / 3 whatever the layer's shape.

Model (torch's own): x's entries independent with E[x^2] = 1, weights independent and zero-mean. Walking the
steps, T's per-entry variance changes only where entries are summed or averaged:

* a contract step multiplies it by v_k · Π|d| over the summed letters of the weight (its *fan-in*), by Π|d|
  over letters summed from T only, and by Π|d|^2 over summed letters along which T is broadcast (a constant
  factor, not independent terms);
* a reduce step by |d| (sum) or 1/|d| (mean) over a varying dim, by |d|^2 (sum) or 1 over a broadcast dim;
* views keep it (UNFOLD's zero padding is ignored, as torch's init ignores a conv's padding).

With G the product of the factors that are not weights and m weights, the product of the weights' factors must
be 1 / (3 G): Π_k Var(w_k) · fan_in_k = 1 / (3 G). All weights get the same variance,
Var(w_k) = (1 / (3 G Π_j fan_in_j))^(1/m), and a conv-equivalent operator gets exactly ``nn.Conv2d``'s
Var(w) = 1 / (3 C_in k^2). Why equal, not one fan-in per contraction (which would keep every intermediate at its
input's scale): for a product of weights the gradient of one is scaled by the others, so at a fixed product the
effective step Σ_k Π_{j≠k} |w_j|^2 is smallest when they are equal; an outer-product weight (fan-in 1) at std 0.76
beside a contraction weight at 0.09 made one SGD step (lr 0.01) of an EfficientNet with operator
54408bc185b56ff0 go NaN (tests/placeholder/test_placeholder.py::test_sampled_operator_trains_big), the equal split
does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from syno_automl.ir.program import Contract, Program, Reduce
from syno_automl.ir.walk import StepBackend, Transition, walk, weight_order, weight_program

__all__ = ["TARGET_GAIN", "weight_stds", "VarianceGain"]

TARGET_GAIN = 1.0 / 3.0  # Var(out) / E[x^2] of nn.Conv2d / nn.Linear at torch's default init


class VarianceGain(StepBackend):
    """Accumulates G (the non-weight factors) and each weight's fan-in."""

    def __init__(self, program: Program) -> None:
        self.p = program
        self.gain = 1.0
        self.fan_in = [1.0] * len(program.weights)

    def view(self, tr: Transition) -> None:
        pass

    def reduce(self, tr: Transition[Reduce]) -> None:
        d, n = tr.step.src, float(self.p.size(tr.step.src))
        if d in tr.pre.bcast:
            self.gain *= 1.0 if tr.step.mean else n * n
        else:
            self.gain *= 1.0 / n if tr.step.mean else n

    def contract(self, tr: Transition[Contract]) -> None:
        c = tr.contract
        assert c is not None  # advance resolves every contract step
        for d in c.summed:
            n = float(self.p.size(d))
            if d in c.weight.dims:
                self.fan_in[c.k] *= n
            elif d in c.factor_dims:
                self.gain *= n * n
            else:
                self.gain *= n

    STEPS = {"split": view, "merge": view, "shift": view, "stride": view, "unfold": view, "expand": view,
             "reduce": reduce, "contract": contract}


def weight_stds(program: Mapping[str, Any] | Program, target_gain: float = TARGET_GAIN) -> list[float]:
    """Per-weight standard deviations (program weight order) such that Var(out) = target_gain · E[x^2]."""
    from syno_automl.ir.parse import parse

    p = parse(program)
    if not p.weights:
        return []
    g = VarianceGain(p)
    walk(p, g)
    for k in weight_order(p):  # the planner's products of weights: their summed letters count as T's would
        walk(weight_program(p, k), g)
    variance = (target_gain / (g.gain * math.prod(g.fan_in))) ** (1.0 / len(p.weights))
    return [math.sqrt(variance)] * len(p.weights)
