"""The lowering planner's weight views (native/plan.hpp point 2, docs/architecture.md §2 "Planner").

A view step acting only on coordinates that a contraction took from its weight (an outer SHARE) is applied to
the weight before the contraction (``program["weights"][k]["views"]``), so the product is formed once, at its
viewed size, instead of being materialized and then rolled / merged / strided. Checked on concrete operators:
the plan's step order, the planned cost (materialized elements, peak) against a hand count, the paper's FLOPs
unchanged, and the generated module equal to the reference evaluator of §1 (forward, and gradients by the
operator's multilinearity).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from _syno_helpers import random_spec_space
from reference_eval import evaluate_reference

from syno_automl import known
from syno_automl.codegen.torch import program_to_source
from syno_automl.ir import count_flops

# 1x1 conv whose output channel is rolled: forward CONTRACTION share [C_in] outer [C_out], SHIFT C_out.
ROLLED_CONV = ["REDUCE C_in", "SHIFT C_out", "CONTRACTION share [C_in] outer [C_out]"]
# issue 10's pattern on a matmul: an outer product with [k*C_out, s, s], merges and strides of its weight's
# coordinates (keeping one element in k*s of them), then a contraction with a second weight.
STRIDED_OUTER = ["REDUCE C_in", "SHIFT C_out", "CONTRACTION share [C_out, C_in] outer []", "STRIDE s*C_in by s",
                 "STRIDE k*s*C_out by k*s", "MERGE [s, k*C_out] -> k*s*C_out", "MERGE [s, C_in] -> s*C_in",
                 "CONTRACTION share [] outer [k*C_out, s, s]"]


def check_oracle(op, mapping) -> None:
    """float64 module == reference evaluator; gradients (x and every weight) == the reference's directional
    derivative, exact since out is linear in each of them: <g, ref(.., a + d, ..) - ref(.., a, ..)> = <grad_a, d>."""
    program = op.program(mapping)
    module = op.to_module(mapping).double()
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(program["input"]["shape"], generator=gen, dtype=torch.float64, requires_grad=True)
    weights = list(module.parameters())
    out = module(x)
    want = evaluate_reference(program, x.detach(), [w.detach() for w in weights])
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-10)
    g = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    grads = torch.autograd.grad(out, [x, *weights], g)
    args = [x.detach(), *[w.detach() for w in weights]]
    for i, grad in enumerate(grads):
        d = torch.randn(args[i].shape, generator=gen, dtype=torch.float64)
        moved = list(args)
        moved[i] = args[i] + d
        delta = evaluate_reference(program, moved[0], moved[1:]) - want
        np.testing.assert_allclose(float((g.numpy() * delta).sum()), float((grad * d).sum()), rtol=1e-9, atol=1e-9)


def test_a_roll_of_an_outer_coordinate_rolls_the_weight():
    op = known.walk(random_spec_space("conv2d"), ROLLED_CONV)
    m = {"N": 8, "C_in": 16, "C_out": 16, "H": 16, "W": 16}
    program = op.program(m)
    assert [s["op"] for s in program["steps"]] == ["contract"]  # the roll left T
    assert [v["op"] for v in program["weights"][0]["views"]] == ["shift"]
    assert "torch.roll(t, -1, 0)" in program_to_source(program).split("t = x")[0]  # on the weight, before x
    # hand count: x permuted to (N, H, W, C_in) for the bmm, its result and the final permute (3 P), the weight's
    # gradient, its roll and the rolled weight's gradient (3 C_out C_in). Rolling the product instead wrote P.
    p, w = m["N"] * m["C_out"] * m["H"] * m["W"], m["C_out"] * m["C_in"]
    cost = program["cost"]
    assert cost["materialized"] == 3 * p + 3 * w < 4 * p + w
    assert cost["flops"] == op.flops(m) == 2 * p * m["C_in"]
    check_oracle(op, 0)
    check_oracle(op, {"N": 2, "C_in": 3, "C_out": 5, "H": 4, "W": 3})


def test_strides_of_an_outer_product_select_on_the_weight_first():
    op = known.walk(random_spec_space("matmul"), STRIDED_OUTER)
    m = {"N": 64, "C_in": 32, "C_out": 16}
    k, s = 3, 2
    program = op.program(m)
    assert [v["op"] for v in program["weights"][0]["views"]] == ["merge", "stride"]
    assert [st["op"] for st in program["steps"]] == ["contract", "merge", "stride", "contract", "shift"]
    # the outer product is formed at its strided size, N C_in C_out s, not N C_in (k s C_out) s
    canonical_product = m["N"] * m["C_in"] * s * k * m["C_out"] * s
    assert program["cost"]["peak"] == m["N"] * m["C_in"] * m["C_out"] * s == canonical_product // (k * s)
    assert program["cost"]["materialized"] < canonical_product
    # the paper's FLOPs still count the canonical product (2 per point) and the second contraction
    assert op.flops(m) == program["flops"] == 2 * canonical_product + 2 * m["N"] * m["C_out"] * m["C_in"]
    check_oracle(op, 0)
    check_oracle(op, {"N": 3, "C_in": 8, "C_out": 4})


def test_views_touching_the_data_stay_on_the_data():
    """A view of a coordinate T holds (here C_out, shared with the second weight) is not moved; nor the views of
    the conv pattern (unfold + unfold + contract stays one convolution)."""
    op = known.walk(random_spec_space("matmul"), STRIDED_OUTER)
    program = op.program(0)
    assert "views" not in program["weights"][1]
    assert program["steps"][-1]["op"] == "shift"
    conv = known.conv2d(random_spec_space("conv2d")).program(0)
    assert not any("views" in w for w in conv["weights"])
    assert [s["op"] for s in conv["steps"]] == ["unfold", "unfold", "contract"]


def test_weight_views_parse_round_trip_and_errors():
    from syno_automl.ir import IRError, parse, viewed_weight

    op = known.walk(random_spec_space("matmul"), STRIDED_OUTER)
    program = op.program(0)
    p = parse(program)
    assert [v.op for v in p.weights[0].views] == ["merge", "stride"]
    assert parse(p.to_dict()) == p
    viewed = viewed_weight(p, 0)
    assert viewed.dims == tuple(program["steps"][0]["out"][2:]) and viewed.views == ()
    bad = json_copy(program)
    bad["weights"][0]["views"][0]["src"] = [999, bad["weights"][0]["views"][0]["src"][1]]
    with pytest.raises(IRError, match=r"weights\[0\]\.views\[0\]"):
        parse(bad)
    bad = json_copy(program)
    bad["weights"][0]["views"].append({"op": "contract", "weight": 0, "rename": {}, "out": []})
    with pytest.raises(IRError, match="cycle"):
        parse(bad)
    bad = json_copy(program)
    bad["weights"][0]["views"].append({"op": "reduce", "src": 0, "mean": False})
    with pytest.raises(IRError, match="not a view of a weight"):
        parse(bad)


def json_copy(program: dict) -> dict:
    return json.loads(json.dumps(program))


# an outer product with C_out (sharing H), then a contraction summing C_in against a second weight that shares
# H and C_out: T(N, C_in, H, W) . w0(C_out, H) . w1(C_out, H, C_in)
TWO_WEIGHTS = ["REDUCE C_in", "CONTRACTION share [C_in, H, C_out] outer []", "CONTRACTION share [H] outer [C_out]"]


def test_two_weights_are_contracted_first_when_that_shrinks_the_largest_intermediate():
    op = known.walk(random_spec_space("conv2d"), TWO_WEIGHTS)
    m = {"N": 4, "C_in": 8, "C_out": 16, "H": 12, "W": 10}
    n, ci, co, h, w = m["N"], m["C_in"], m["C_out"], m["H"], m["W"]
    program = op.program(m)
    # one contraction of x with the product of the weights, w0 . w1 -> (C_out, H, C_in), made first
    assert [s["op"] for s in program["steps"]] == ["contract"]
    assert [(v["op"], v["weight"]) for v in program["weights"][0]["views"]] == [("contract", 1)]
    # canonical: the outer product (N, C_in, H, W, C_out) is the largest intermediate; planned: the output
    cost = program["cost"]
    assert cost["peak"] == n * co * h * w < n * ci * h * w * co
    # hand count: x copied for the bmm, its result, the final permute; the weights' product, its gradient and
    # the gradients of w1 and w0
    assert cost["materialized"] == n * ci * h * w + 2 * n * co * h * w + 3 * co * h * ci + co * h
    # FLOPs: the paper's count is the canonical order's (outer product + contraction, 2 per point each); the
    # planned program does the weights' product and one contraction summing C_in
    assert op.flops(m) == program["flops"] == 2 * n * ci * h * w * co + 2 * n * ci * h * w * co
    assert count_flops(program) == 2 * co * h * ci + 2 * n * co * h * w * ci
    assert cost["flops"] == count_flops(program)
    check_oracle(op, 0)
    check_oracle(op, {"N": 2, "C_in": 3, "C_out": 5, "H": 4, "W": 3})
    # the initial scales are those of the canonical order (the product's summed letters count as they did)
    from syno_automl.ir import weight_stds

    stds = weight_stds(program)
    assert len(stds) == 2 and stds[0] == pytest.approx(stds[1]) and stds[0] == pytest.approx((1 / (3 * ci)) ** 0.25)
