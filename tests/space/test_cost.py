"""The lowering planner and the cost model of the planned program (docs/architecture.md §2, "Planner", "Cost").

* cost of known operators: the conv-equivalent is one convolution (FLOPs + its output written, nothing else),
  which is what ``placeholder.layer_cost`` charges the replaced layer;
* monotonicity: a bigger batch or more channels never costs less;
* the budget: every operator sampled under ``max_cost`` is within it (summed over mappings), an operator over it
  is not a child in the budgeted space, and ``substitute(cost_ratio=...)`` bounds it relative to the layers;
* the planner keeps the semantics (the oracle tests run it on every spec) and its order: inside a run of view
  steps, no stride comes after a roll or an unfold it does not depend on;
* roll + stride of the rolled dim is one offset slice in the generated module, equal to the reference.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference_eval import evaluate_reference
from torch import nn

from syno_automl import OperatorSpace, _native
from syno_automl.codegen.torch import build_module, program_to_source
from syno_automl.errors import EmptySpaceError, OperatorFormatError, ValuationError
from syno_automl.known import conv2d
from syno_automl.placeholder import layer_cost, substitute

CONV = ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2", "s=2: 2"])
E = _native.ELEMENT_COST


def conv_space(mappings=None, **options) -> OperatorSpace:
    mappings = mappings or [{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}]
    return OperatorSpace(*CONV, mappings, max_depth=6, **options)


def test_conv2d_costs_one_convolution():
    space = conv_space([{"N": 4, "C_in": 8, "C_out": 16, "H": 8, "W": 8}])
    op = conv2d(space)
    cost = op.cost()
    out = 4 * 16 * 8 * 8
    assert cost["flops"] == op.flops() == 2 * out * 8 * 9
    weight = 16 * 8 * 9
    assert cost["materialized"] == out + weight  # the conv's result and its weight's gradient: no other copy
    assert cost["total"] == cost["flops"] + E * cost["materialized"]
    assert cost["peak"] == max(out, 4 * 8 * 8 * 8)
    layer = nn.Conv2d(8, 16, 3, padding=1, bias=False)
    assert layer_cost(2 * out * 8 * 9, (4, 16, 8, 8), layer.weight.numel()) == pytest.approx(cost["total"])
    assert op.total_cost() == pytest.approx(cost["total"])


def test_cost_is_monotone_in_sizes():
    small = conv_space([{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}])
    ops = small.sample(20, seed=3)
    assert ops
    compared = 0
    for op in ops:
        base = op.cost()
        for bigger in ({"N": 4}, {"C_in": 8}, {"C_out": 8}, {"H": 16}):
            try:
                grown = op.cost({**small.mapping(0), **bigger})
            except (OperatorFormatError, ValuationError):  # not valid at that valuation: nothing to compare
                continue
            compared += 1
            assert grown["total"] >= base["total"], (op.hash, bigger)
            assert grown["peak"] >= base["peak"]
        assert base["flops"] >= 0 and base["materialized"] > 0
        assert base["flops"] <= op.flops()  # the plan never computes more than the paper's count
    assert compared >= len(ops)


def test_max_cost_is_a_hard_budget():
    free = conv_space()
    ops = free.sample(40, seed=5)
    costs = sorted(op.total_cost() for op in ops)
    limit = costs[len(costs) // 2]
    bounded = conv_space(max_cost=limit)
    inside = bounded.sample(20, seed=5)
    assert inside and all(op.total_cost() <= limit for op in inside)
    over = next(op for op in ops if op.total_cost() > limit)
    assert over.hash not in {op.hash for op in bounded.sample(40, seed=6)}
    # Budgets steer the search only: replay is structural (docs/architecture.md, "Valuations and replay"), so
    # an over-budget operator still loads there, with its cost unchanged.
    assert bounded.replay(over.path).to_operator().total_cost() == over.total_cost()


def test_substitute_bounds_cost_relative_to_layers():
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1, bias=False))
    sub = substitute(model, nn.Conv2d, torch.randn(2, 8, 8, 8), flops_ratio=0.5, cost_ratio=0.8, max_depth=6,
                     check=False)  # nearly empty: the check would refuse it (test_library_path)
    assert sub.baseline_cost == pytest.approx(2 * layer_cost(2 * 2 * 8 * 8 * 8 * 8 * 9, (2, 8, 8, 8), 8 * 8 * 9))
    assert sub.space.budgets["max_cost"] == pytest.approx(0.8 * sub.baseline_cost)
    try:  # layers this small: every sampled descent may cost more than 0.8 convs, which sample() now says
        ops = sub.space.sample(10, seed=1)
    except EmptySpaceError as e:
        assert "cost_ratio" in str(e)
        ops = []
    for op in ops:
        assert sub.cost_ratio(op) <= 0.8 + 1e-9
    with pytest.raises(Exception, match="cost_ratio"):
        substitute(nn.Sequential(nn.Conv2d(8, 8, 3, padding=1)), nn.Conv2d, torch.randn(2, 8, 8, 8), cost_ratio=-1.0)


RANK = {"stride": 0, "split": 1, "merge": 2, "expand": 3, "shift": 4, "unfold": 5}


def _dims(value) -> set[int]:
    return set(value if isinstance(value, list) else [] if value is None else [value])


@pytest.mark.parametrize("seed", [1, 2])
def test_planner_puts_selections_before_rolls_and_unfolds(seed):
    """A list schedule by rank: a step placed after an earlier step of higher rank was not ready then, i.e. it
    reads a dim made by a step at or after that one."""
    space = conv_space([{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}])
    checked = 0
    for op in space.sample(30, seed=seed):
        steps = op.program()["steps"]
        run: list[dict] = []
        for st in steps + [{"op": "contract"}]:
            if st["op"] not in ("contract", "reduce"):
                run.append(st)
                continue
            for j, later in enumerate(run):
                deps = [k for k in range(j) if _dims(run[k].get("dst")) & _dims(later.get("src"))]
                for i in range(j):
                    if RANK[run[i]["op"]] > RANK[later["op"]]:
                        checked += 1
                        assert deps and max(deps) >= i, (op.hash, run)
            run = []
    assert checked > 0  # the property was exercised


def test_roll_then_stride_is_one_offset_slice():
    program = {
        "input": {"dims": [0, 1], "shape": [3, 8]},
        "weights": [],
        "output": {"dims": [0, 3], "shape": [3, 4]},
        "sizes": {0: 3, 1: 8, 2: 8, 3: 4},
        "steps": [{"op": "shift", "src": 1, "dst": 2}, {"op": "stride", "src": 2, "dst": 3, "stride": 2}],
        "flops": 0, "params": 0,
    }
    source = program_to_source(program)
    assert "1::2" in source and "torch.roll" not in source
    x = torch.randn(3, 8, dtype=torch.float64)
    got = build_module(program).double()(x)
    assert torch.equal(got, torch.roll(x, -1, 1)[:, ::2])


def test_planned_module_matches_reference_on_rolled_strided_operators():
    space = conv_space([{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}])
    checked = 0
    for op in space.sample(60, seed=7):
        program = op.program()
        ops = [st["op"] for st in program["steps"]]
        if not any(a == "shift" and b == "stride" for a, b in zip(ops, ops[1:])):
            continue
        module = build_module(program).double()
        x = torch.randn(*program["input"]["shape"], dtype=torch.float64)
        weights = [p.detach() for p in module.parameters()]
        want = evaluate_reference(program, x, weights)
        assert torch.allclose(module(x), torch.as_tensor(want), atol=1e-9), op.hash
        checked += 1
    assert checked > 0
    assert math.isfinite(checked)
