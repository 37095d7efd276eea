"""Soundness of the partial-path cost bound (native/bounds.cpp, ``cost_bound``): the search never expands a
node whose every completion costs more than ``max_cost``, and that pruning removes no operator.

* Directly: along the path of every operator of small enumerated spaces, every node's ``cost_bound`` is at most
  the operator's planned cost (``Operator.total_cost``).
* As a property: random small specs and options are enumerated under a ``max_cost`` drawn from the costs of
  their own operators, with and without ``cost_pruning``; both must give the same operators (as
  tests/space/test_distance_soundness.py does for the shape distance), and pruning must expand fewer nodes somewhere.
"""
from __future__ import annotations

from _syno_helpers import assert_cost_bounds_hold
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syno_automl import OperatorSpace

# (input, output, variables, coefficients, valuations)
SPECS = [
    ("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in: 2", "C_out: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
     [{"N": 2, "C_in": 4, "C_out": 4, "L": 12}, {"N": 3, "C_in": 2, "C_out": 6, "L": 6}]),
    ("[C_in, H, W]", "[C_out, H, W]", ["C_in: 1", "C_out: 1", "H: 2", "W: 2"], ["k=3: 2", "s=2: 1"],
     [{"C_in": 4, "C_out": 4, "H": 6, "W": 6}]),
    ("[N, H]", "[N, H]", ["N: 0", "H: 2"], ["k=3: 2", "s=2: 2"], [{"N": 4, "H": 12}]),
]


def space(spec: tuple, **options) -> OperatorSpace:
    inp, out, primary, coefficients, mappings = spec
    return OperatorSpace(inp, out, primary, coefficients, mappings, threads=1, **options)


def test_bound_never_exceeds_the_cost_of_an_operator_below():
    checked = 0
    for spec in SPECS:
        for max_depth, counts in ((4, {}), (5, {"UNFOLD": 1, "SHIFT": 1}), (4, {"EXPAND": 1})):
            sp = space(spec, max_depth=max_depth, max_counts=counts, max_weights=2)
            ops = sp.enumerate(max_operators=400).operators
            assert ops
            checked += assert_cost_bounds_hold(sp, ops)
    assert checked > 1000


@st.composite
def budgeted(draw: st.DrawFn) -> tuple[tuple, dict, float]:
    spec = draw(st.sampled_from(SPECS))
    counts = {p: draw(st.sampled_from([0, 1, 2, None])) for p in ("UNFOLD", "SHIFT", "STRIDE", "EXPAND")}
    options = dict(max_depth=draw(st.integers(3, 4)), max_weights=draw(st.integers(1, 2)),
                   max_counts={p: c for p, c in counts.items() if c is not None},
                   canonical_rules=draw(st.booleans()))
    costs = sorted(op.total_cost() for op in space(spec, **options).enumerate(max_operators=10**6).operators)
    quantile = draw(st.sampled_from([0.05, 0.3, 0.7]))
    limit = costs[int(quantile * (len(costs) - 1))] if costs else 1.0
    return spec, options, limit


def run(spec: tuple, options: dict, limit: float, pruning: bool) -> tuple[set[str], int]:
    result = space(spec, **options, max_cost=limit, cost_pruning=pruning).enumerate(max_operators=0)
    assert result.stop_reason == "exhausted"
    return result.hashes, sum(result.nodes_per_depth)


@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budgeted())
def test_cost_pruning_keeps_every_operator(case: tuple[tuple, dict, float]) -> None:
    spec, options, limit = case
    with_pruning, expanded = run(spec, options, limit, True)
    without, expanded_all = run(spec, options, limit, False)
    assert with_pruning == without
    assert expanded <= expanded_all


def test_cost_pruning_prunes():
    """The bound is not vacuous: under a tight budget, fewer nodes are expanded with it than without."""
    spec = SPECS[0]
    options = dict(max_depth=5, max_weights=2, max_counts={"SHIFT": 1, "UNFOLD": 1, "STRIDE": 1})
    costs = sorted(op.total_cost() for op in space(spec, **options).enumerate(max_operators=10**6).operators)
    limit = costs[len(costs) // 10]
    with_pruning, expanded = run(spec, options, limit, True)
    without, expanded_all = run(spec, options, limit, False)
    assert with_pruning == without and with_pruning
    assert expanded < expanded_all
