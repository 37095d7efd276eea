"""Impossible budgets: an EmptySpaceError naming the budget, proven by a bound before any search; the bounds hold
for every operator found, budgets they allow are not refused, and a budget that leaves sampling with nothing,
unproven, says so instead of returning [] without a word."""
from __future__ import annotations

import pytest
from _syno_helpers import conv_space

from syno_automl import EmptySpaceError

BUDGETS = [
    ({"max_flops": 1}, "max_flops=1 empties the space: every operator needs at least"),
    ({"max_params": 0}, "max_params=0 empties the space: every operator has at least"),
    ({"min_flops": 1e30}, "min_flops=1e+30 empties the space: no operator reaches it"),
    ({"min_params": 1e30}, "min_params=1e+30 empties the space: no operator reaches it"),
    ({"max_memory": 1}, "max_memory=1 empties the space: every operator stores an intermediate"),
    ({"max_cost": 1.0}, "max_cost=1 empties the space: every operator's planned cost is at least"),  # a ratio typed
    ({"max_cost": 0, "coefficients": ["k=3: 2", "s=2: 2"]}, "max_cost=0 empties"),  # once sampled [] for 5 s
]


@pytest.mark.parametrize("budget, message", BUDGETS, ids=[repr(b[0]) for b in BUDGETS])
def test_impossible_budgets_are_proven_empty(budget: dict, message: str) -> None:
    s = conv_space(**budget)
    with pytest.raises(EmptySpaceError) as info:
        s.sample(1)
    assert message in str(info.value)
    assert not hasattr(s, "last_report")  # raised before any search ran


@pytest.mark.parametrize("kwargs", [
    {},
    {"max_depth": 5, "coefficients": ["k=3: 2", "s=2: 2"]},
    {"input_shape": "[N, C_in]", "output_shape": "[N, C_out]", "primary": ["N: 0", "C_in: 2", "C_out: 2"],
     "mappings": [{"N": 3, "C_in": 6, "C_out": 4}, {"N": 1, "C_in": 2, "C_out": 8}], "max_depth": 5},
    {"input_shape": "[N, C, H, W]", "output_shape": "[N, C, s^-1*H, s^-1*W]", "primary": ["N: 0", "C: 0", "H: 2",
     "W: 2"], "coefficients": ["s=2: 2"], "mappings": [{"N": 2, "C": 3, "H": 8, "W": 8}], "min_weights": 0},
])
def test_budget_bounds_hold_for_every_operator_found(kwargs: dict) -> None:
    s = conv_space(**kwargs)
    bounds = s._native.budget_bounds()
    ops = s.sample(60, seed=1, time_limit=10)
    assert len(ops) >= 10
    for op in ops:
        totals = op._native.totals()
        assert bounds["min_flops"] <= totals["flops"] <= bounds["max_flops"]
        assert bounds["min_params"] <= totals["params"] <= bounds["max_params"]
        assert bounds["min_memory"] <= totals["memory"]
        assert bounds["min_cost"] <= totals["cost"]


def test_budgets_the_bounds_allow_are_not_refused() -> None:
    s = conv_space(max_flops=1e12, min_flops=1.0, max_memory=1e9)
    assert s._budget_conflict is None and len(s.sample(2, seed=0)) == 2


def test_sampling_that_finds_nothing_says_so() -> None:
    # a cost budget that leaves nothing (above the proven bound, below any operator) is named as the reason
    s = conv_space(max_depth=6, coefficients=["k=3: 2", "s=2: 2"], max_cost=1000)
    with pytest.raises(EmptySpaceError, match=r"no operator found within max_cost=1000 .* in 10 descents"):
        s.sample(2, seed=0, max_attempts=10)
    assert s.last_report.stop_reason == "attempts"
