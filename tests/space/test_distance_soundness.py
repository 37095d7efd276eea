"""Shape-distance soundness as a property: pruning by distance never removes a reachable operator.

Random small specs and option combinations (count limits including 0, coefficient degrees, unordered and
pass-through dims, several valuations, budgets, weight counts) are enumerated to a small depth with and
without distance pruning; both must give the same operators.
"""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from syno_automl import Operator, OperatorSpace

PRIMS = ["SPLIT", "MERGE", "SHIFT", "STRIDE", "UNFOLD", "EXPAND", "REDUCE"]
# (input, output, variables, valuations): small shapes; "N: 0" makes N pass straight through. Each other
# variable's allowance is drawn (1 or 2): small allowances keep the unpruned enumeration fast at depth 4.
SPECS = [
    ("[N, H]", "[N, H]", ["N: 0", "H"], [{"N": 2, "H": 8}, {"N": 3, "H": 6}]),
    ("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in", "C_out", "L"],
     [{"N": 2, "C_in": 4, "C_out": 4, "L": 12}, {"N": 1, "C_in": 2, "C_out": 6, "L": 6}]),
    ("[C_in: unordered, L]", "[C_out: unordered, L]", ["C_in", "C_out", "L"], [{"C_in": 4, "C_out": 8, "L": 12}]),
    ("[N, C, H]", "[N, C, H]", ["N: 0", "C", "H"], [{"N": 2, "C": 6, "H": 12}]),
    ("[H, W]", "[H]", ["H", "W"], [{"H": 6, "W": 4}, {"H": 12, "W": 2}]),
]


@st.composite
def spaces(draw: st.DrawFn) -> dict:
    inp, out, variables, valuations = draw(st.sampled_from(SPECS))
    primary = [v if ":" in v else f"{v}: {draw(st.integers(1, 2))}" for v in variables]
    mappings = valuations[:draw(st.integers(1, len(valuations)))]
    coefficients = draw(st.sampled_from([[], ["k=3"], ["s=2"], ["k=3", "s=2"]]))
    coefficients = [f"{c}: {draw(st.integers(1, 2))}" for c in coefficients]
    limited = draw(st.lists(st.sampled_from(PRIMS), max_size=4, unique=True))
    max_counts = {p: draw(st.sampled_from([0, 0, 1, 2])) for p in limited}  # forbidding is the risky case
    max_weights = draw(st.integers(1, 2))
    options = dict(
        max_counts=max_counts, max_weights=max_weights, min_weights=draw(st.integers(0, max_weights)),
        max_reductions=draw(st.integers(0, 2)), max_coefficient_degree=draw(st.integers(0, 2)),
        max_primary_degree=draw(st.integers(1, 2)), max_size_variables=draw(st.integers(2, 3)),
        canonical_rules=draw(st.booleans()),
    )
    if draw(st.booleans()):
        options["max_params"] = float(draw(st.sampled_from([64, 1000, 100_000])))
    if draw(st.booleans()):
        options["max_flops"] = float(draw(st.sampled_from([20_000, 200_000])))
    return dict(input_shape=inp, output_shape=out, primary=primary, coefficients=coefficients,
                mappings=mappings, max_depth=draw(st.integers(3, 4)), **options)


def operators(config: dict, pruning: bool) -> set[str]:
    result = OperatorSpace(**config, distance_pruning=pruning, threads=1).enumerate(max_operators=0)
    assert result.stop_reason == "exhausted"
    return result.hashes


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces())
@example(dict(  # issue 15 in small: STRIDE forbidden, C_out/s dropped by an outer SHARE
    input_shape="[C_in: unordered, L]", output_shape="[C_out: unordered, L]", primary=["C_in: 1", "C_out: 2", "L: 1"],
    coefficients=["s=2: 1"], mappings=[{"C_in": 4, "C_out": 8, "L": 8}], max_depth=4, max_counts={"STRIDE": 0},
    max_reductions=1))
def test_distance_pruning_keeps_every_operator(config: dict) -> None:
    assert operators(config, True) == operators(config, False)


def test_forbidding_a_primitive_keeps_the_operators_without_it() -> None:
    """Issue 15: with STRIDE: 0, operators that use no STRIDE must not disappear (884 did at depth 4)."""
    base = dict(input_shape="[N, C_in: unordered, H, W]", output_shape="[N, C_out: unordered, H, W]",
                primary=["N: 0", "C_in: 2", "C_out: 4", "H: 2", "W: 2"], coefficients=["k=3: 2", "s=2: 2"],
                mappings=[{"N": 32, "C_in": 64, "C_out": 64, "H": 32, "W": 32}], max_depth=4, max_weights=2,
                max_reductions=5, min_unfold_ratio=2.3, min_weight_params=100, max_size_variables=3,
                max_coefficient_degree=2)

    def space(stride: int, **kw) -> OperatorSpace:
        counts = {"MERGE": 1, "SPLIT": 3, "SHIFT": 2, "STRIDE": stride, "EXPAND": 0}
        return OperatorSpace(**base, max_counts=counts, **kw)

    none = space(0).enumerate(4, max_operators=10**6)
    one = space(1).enumerate(4, max_operators=10**6)
    assert none.stop_reason == one.stop_reason == "exhausted"
    stride_free = [op for op in one.operators if "STRIDE" not in op.primitive_counts()]
    assert len(stride_free) == 4372
    lost = [op for op in stride_free if op.hash not in none.hashes]
    assert lost == []
    assert none.operator_count == len(stride_free)
    # The operator the issue lost replays in the STRIDE: 0 space and is found there.
    found = {op.hash: op for op in none.operators}
    shown = [op for op in stride_free if "CONTRACTION share [C_in] outer [s^-1*C_out]\n" in str(op)]
    assert shown and all(Operator.from_json(space(0), op.to_json()).hash in found for op in shown)
