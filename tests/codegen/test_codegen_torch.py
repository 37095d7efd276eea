"""Tests of the PyTorch code generator (syno_automl.codegen.torch) on HAND-WRITTEN kernel-IR programs.

Every program below has both ``steps`` (what the generated module executes) and ``expr`` (the §1 oracle,
checked by tests/reference_eval.py) filled in consistently, plus hand-computed ``flops``/``params``.

Weight layouts (how a PyTorch op's weight maps to the program's ``w_k``; see ``Case.to_program``):

* conv2d        w0 [C_out, C_in, kh, kw]          = conv2d weight, unchanged
* depthwise     w0 [C, kh, kw]                    = conv2d weight [C, 1, kh, kw] [:, 0]
* grouped (g=2) w0 [g, C_out/g, C_in/g, kh, kw]   = conv2d weight [C_out, C_in/g, kh, kw].reshape(...)
                (output channel o = g * C_out/g + j, input channel c = g * C_in/g + i)
* linear        w0 [C_out, C_in]                  = F.linear weight, unchanged
* shift_stride  w0 [C_out, C_in]                  = conv1d weight [C_out, C_in, 1] [:, :, 0]
* two_contract  w0 [R, C_in]                      = 1x1 conv1d weight [R, C_in, 1] [:, :, 0]
                w1 [C_out, R, k]                  = conv1d weight, unchanged
* broadcast     w0 [C_out, C_in]                  = F.linear weight, unchanged
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from reference_eval import evaluate_reference, evaluate_reference_loops

from syno_automl.codegen.torch import build_module, count_flops, program_to_source

RTOL = 1e-5
ATOL = 1e-5


# --------------------------------------------------------------------------------------------------------
# expression helpers
# --------------------------------------------------------------------------------------------------------

def it(j):
    return ["it", j]


def red(j):
    return ["red", j]


def const(c):
    return ["const", c]


def add(a, b):
    return ["add", a, b]


def sub(a, b):
    return ["sub", a, b]


def mul(a, c):
    return ["mul", a, c]


def div(a, c):
    return ["div", a, c]


def mod(a, c):
    return ["mod", a, c]


def pad(a, n):
    return ["pad", a, n]


def program(inp, out, sizes, steps, expr, weights=(), free_dims=(0,), flops=None):
    """Assemble a program dict; ``inp``/``out`` are dim lists, shapes come from ``sizes``."""
    prog = {
        "input": {"dims": list(inp), "shape": [sizes[d] for d in inp]},
        "weights": [{"dims": list(d), "shape": [sizes[i] for i in d], "fan_in": f} for d, f in weights],
        "output": {"dims": list(out), "shape": [sizes[d] for d in out]},
        "sizes": dict(sizes),
        "steps": steps,
        "free_dims": list(free_dims),
        "expr": expr,
    }
    prog["params"] = sum(math.prod(w["shape"]) for w in prog["weights"])
    prog["flops"] = flops
    return prog


# --------------------------------------------------------------------------------------------------------
# hand-written operators
# --------------------------------------------------------------------------------------------------------

def conv2d_program(N=2, C_in=3, C_out=4, H=6, W=6, k=3):
    """out[n, o, h, w] = sum_{c, kh, kw} x[n, c, h + kh - 1, w + kw - 1] * w0[o, c, kh, kw] (zero padded)."""
    sizes = {0: N, 1: C_in, 2: H, 3: W, 4: H, 5: k, 6: W, 7: k, 9: C_out, 10: C_in, 11: k, 12: k}
    steps = [
        {"op": "unfold", "src": 2, "dst": [4, 5], "window": k},
        {"op": "unfold", "src": 3, "dst": [6, 7], "window": k},
        {"op": "contract", "weight": 0, "rename": {1: 10, 5: 11, 7: 12}, "out": [0, 9, 4, 6]},
    ]
    h = k // 2
    expr = {
        "iterators": [N, C_out, H, W], "reductions": [C_in, k, k], "mean": [False] * 3,
        "input": [it(0), red(0), pad(sub(add(it(2), red(1)), const(h)), H),
                  pad(sub(add(it(3), red(2)), const(h)), W)],
        "weights": [[it(1), red(0), red(1), red(2)]],
    }
    return program([0, 1, 2, 3], [0, 9, 4, 6], sizes, steps, expr, weights=[([9, 10, 11, 12], C_in * k * k)],
                   flops=2 * N * C_out * H * W * C_in * k * k)


def depthwise_program(N=2, C=3, H=6, W=6, k=3):
    sizes = {0: N, 1: C, 2: H, 3: W, 4: H, 5: k, 6: W, 7: k, 8: C, 9: k, 10: k}
    steps = [
        {"op": "unfold", "src": 2, "dst": [4, 5], "window": k},
        {"op": "unfold", "src": 3, "dst": [6, 7], "window": k},
        {"op": "contract", "weight": 0, "rename": {1: 8, 5: 9, 7: 10}, "out": [0, 8, 4, 6]},
    ]
    expr = {
        "iterators": [N, C, H, W], "reductions": [k, k], "mean": [False, False],
        "input": [it(0), it(1), pad(sub(add(it(2), red(0)), const(1)), H),
                  pad(sub(add(it(3), red(1)), const(1)), W)],
        "weights": [[it(1), red(0), red(1)]],
    }
    return program([0, 1, 2, 3], [0, 8, 4, 6], sizes, steps, expr, weights=[([8, 9, 10], k * k)],
                   flops=2 * N * C * H * W * k * k)


def grouped_program(N=2, G=2, C_in=4, C_out=6, H=5, W=5, k=3):
    ci, co = C_in // G, C_out // G
    sizes = {0: N, 1: C_in, 2: H, 3: W, 4: G, 5: ci, 6: H, 7: k, 8: W, 9: k,
             10: G, 11: ci, 12: k, 13: k, 14: co, 15: C_out}
    steps = [
        {"op": "split", "src": 1, "dst": [4, 5]},                  # c = g * ci + i
        {"op": "unfold", "src": 2, "dst": [6, 7], "window": k},
        {"op": "unfold", "src": 3, "dst": [8, 9], "window": k},
        # T [0, 10, 11, 6, 12, 8, 13]; w0 [g, j, i, kh, kw]; out order deliberately scrambled
        {"op": "contract", "weight": 0, "rename": {4: 10, 5: 11, 7: 12, 9: 13}, "out": [0, 6, 14, 10, 8]},
        {"op": "merge", "src": [10, 14], "dst": 15},              # o = g * co + j (14 moves after 10)
    ]
    expr = {
        "iterators": [N, C_out, H, W], "reductions": [ci, k, k], "mean": [False] * 3,
        "input": [it(0), add(mul(div(it(1), co), ci), red(0)), pad(sub(add(it(2), red(1)), const(1)), H),
                  pad(sub(add(it(3), red(2)), const(1)), W)],
        "weights": [[div(it(1), co), mod(it(1), co), red(0), red(1), red(2)]],
    }
    return program([0, 1, 2, 3], [0, 15, 6, 8], sizes, steps, expr, weights=[([10, 14, 11, 12, 13], ci * k * k)],
                   flops=2 * N * C_out * H * W * ci * k * k)


def avgpool_program(N=2, C=3, H=6, W=6, s=2):
    sizes = {0: N, 1: C, 2: H, 3: W, 4: H // s, 5: s, 6: W // s, 7: s}
    steps = [
        {"op": "split", "src": 2, "dst": [4, 5]},
        {"op": "split", "src": 3, "dst": [6, 7]},
        {"op": "reduce", "src": 5, "mean": True},
        {"op": "reduce", "src": 7, "mean": True},
    ]
    expr = {
        "iterators": [N, C, H // s, W // s], "reductions": [s, s], "mean": [True, True],
        "input": [it(0), it(1), add(mul(it(2), s), red(0)), add(mul(it(3), s), red(1))],
        "weights": [],
    }
    return program([0, 1, 2, 3], [0, 1, 4, 6], sizes, steps, expr,
                   flops=N * C * H * W + N * C * (H // s) * W)


def pixel_shuffle_program(N=2, C=3, r=2, H=3, W=3):
    sizes = {0: N, 1: C * r * r, 2: H, 3: W, 4: C, 5: r * r, 6: r, 7: r, 8: H * r, 9: W * r}
    steps = [
        {"op": "split", "src": 1, "dst": [4, 5]},      # channel = c * r^2 + (i * r + j)
        {"op": "split", "src": 5, "dst": [6, 7]},      # T [0, 4, 6, 7, 2, 3]
        {"op": "merge", "src": [2, 6], "dst": 8},      # h' = h * r + i   -> T [0, 4, 7, 8, 3]
        {"op": "merge", "src": [3, 7], "dst": 9},      # w' = w * r + j   -> T [0, 4, 8, 9]
    ]
    expr = {
        "iterators": [N, C, H * r, W * r], "reductions": [], "mean": [],
        "input": [it(0), add(add(mul(it(1), r * r), mul(mod(it(2), r), r)), mod(it(3), r)),
                  div(it(2), r), div(it(3), r)],
        "weights": [],
    }
    return program([0, 1, 2, 3], [0, 4, 8, 9], sizes, steps, expr, flops=0)


def linear_program(N=3, C_in=5, C_out=4):
    sizes = {0: N, 1: C_in, 2: C_out, 3: C_in}
    steps = [{"op": "contract", "weight": 0, "rename": {1: 3}, "out": [0, 2]}]
    expr = {"iterators": [N, C_out], "reductions": [C_in], "mean": [False],
            "input": [it(0), red(0)], "weights": [[it(1), red(0)]]}
    return program([0, 1], [0, 2], sizes, steps, expr, weights=[([2, 3], C_in)], flops=2 * N * C_in * C_out)


def shift_stride_program(N=2, C_in=3, C_out=4, L=8, s=2):
    """out[n, o, l] = sum_c w0[o, c] * x[n, c, (l * s + 1) mod L]."""
    sizes = {0: N, 1: C_in, 2: L, 3: L, 4: L // s, 5: C_in, 6: C_out}
    steps = [
        {"op": "shift", "src": 2, "dst": 3},
        {"op": "stride", "src": 3, "dst": 4, "stride": s},
        {"op": "contract", "weight": 0, "rename": {1: 5}, "out": [0, 6, 4]},
    ]
    expr = {"iterators": [N, C_out, L // s], "reductions": [C_in], "mean": [False],
            "input": [it(0), red(0), mod(add(mul(it(2), s), const(1)), L)],
            "weights": [[it(1), red(0)]]}
    return program([0, 1, 2], [0, 6, 4], sizes, steps, expr, weights=[([6, 5], C_in)],
                   flops=2 * N * C_in * C_out * (L // s))


def two_contract_program(N=2, C_in=4, R=2, C_out=3, L=5, k=3):
    """1x1 conv C_in -> R, then a k-wide conv R -> C_out (zero padded)."""
    sizes = {0: N, 1: C_in, 2: L, 3: C_in, 4: R, 5: L, 6: k, 7: R, 8: k, 9: C_out}
    steps = [
        {"op": "contract", "weight": 0, "rename": {1: 3}, "out": [0, 4, 2]},
        {"op": "unfold", "src": 2, "dst": [5, 6], "window": k},
        {"op": "contract", "weight": 1, "rename": {4: 7, 6: 8}, "out": [0, 9, 5]},
    ]
    expr = {"iterators": [N, C_out, L], "reductions": [C_in, R, k], "mean": [False] * 3,
            "input": [it(0), red(0), pad(sub(add(it(2), red(2)), const(k // 2)), L)],
            "weights": [[red(1), red(0)], [it(1), red(1), red(2)]]}
    return program([0, 1, 2], [0, 9, 5], sizes, steps, expr, weights=[([4, 3], C_in), ([9, 7, 8], R * k)],
                   flops=2 * N * C_in * R * L + 2 * N * R * L * k * C_out)


def broadcast_program(N=2, C_in=3, C_out=4, K=2):
    """Expanded (broadcast) dims: kept virtual through a contraction, a mean-reduce and a shift.

    out[n, k, o] = 2 * sum_c x[n, c] * w0[o, c]   (the 2: dim 7 (size 2) is expanded then summed by the contraction)
    """
    sizes = {0: N, 1: C_in, 2: C_out, 3: C_in, 4: C_out, 5: K, 6: 3, 7: 2, 8: K}
    steps = [
        {"op": "expand", "dst": 2},                                  # outer share: C_out
        {"op": "expand", "dst": 7},
        {"op": "contract", "weight": 0, "rename": {1: 3, 2: 4}, "out": [0, 4]},
        {"op": "expand", "dst": 5},
        {"op": "expand", "dst": 6},
        {"op": "reduce", "src": 6, "mean": True},
        {"op": "shift", "src": 5, "dst": 8},
    ]
    expr = {"iterators": [N, K, C_out], "reductions": [C_in, 2, 3], "mean": [False, False, True],
            "input": [it(0), red(0)], "weights": [[it(2), red(0)]]}
    return program([0, 1], [0, 8, 4], sizes, steps, expr, weights=[([4, 3], C_in)],
                   flops=2 * N * C_in * C_out * 2 + N * C_out * K * 3)


@dataclass
class Case:
    name: str
    make: Callable[[], dict]
    torch_weight_shapes: list[tuple]
    torch_fn: Callable  # (x, *torch_weights) -> reference output
    to_program: Callable = field(default=lambda ws: list(ws))  # torch weights -> program-layout weights


CASES = [
    Case("conv2d", conv2d_program, [(4, 3, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1)),
    Case("depthwise", depthwise_program, [(3, 1, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1, groups=3),
         lambda ws: [ws[0][:, 0]]),
    Case("grouped", grouped_program, [(6, 2, 3, 3)], lambda x, w: F.conv2d(x, w, padding=1, groups=2),
         lambda ws: [ws[0].reshape(2, 3, 2, 3, 3)]),
    Case("avgpool", avgpool_program, [], lambda x: F.avg_pool2d(x, 2, 2)),
    Case("pixel_shuffle", pixel_shuffle_program, [], lambda x: F.pixel_shuffle(x, 2)),
    Case("linear", linear_program, [(4, 5)], lambda x, w: F.linear(x, w)),
    Case("shift_stride", shift_stride_program, [(4, 3, 1)],
         lambda x, w: F.conv1d(torch.roll(x, -1, 2), w, stride=2), lambda ws: [ws[0][:, :, 0]]),
    Case("two_contract", two_contract_program, [(2, 4, 1), (3, 2, 3)],
         lambda x, wa, wb: F.conv1d(F.conv1d(x, wa), wb, padding=1), lambda ws: [ws[0][:, :, 0], ws[1]]),
    Case("broadcast", broadcast_program, [(4, 3)],
         lambda x, w: (2 * F.linear(x, w)).unsqueeze(1).expand(-1, 2, -1)),
]
IDS = [c.name for c in CASES]


def load_weights(module: torch.nn.Module, weights) -> None:
    with torch.no_grad():
        for k, w in enumerate(weights):
            getattr(module, f"w{k}").copy_(w)


def module_weights(module: torch.nn.Module, n: int):
    return [getattr(module, f"w{k}") for k in range(n)]


# --------------------------------------------------------------------------------------------------------
# (a) generated module == PyTorch op (forward and gradients)
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_torch_op_forward_and_grad(case: Case):
    torch.manual_seed(0)
    prog = case.make()
    module = build_module(prog)
    x = torch.randn(prog["input"]["shape"], requires_grad=True)
    tw = [torch.randn(s, requires_grad=True) for s in case.torch_weight_shapes]
    pw = [w.detach() for w in case.to_program(tw)]
    assert [list(w.shape) for w in pw] == [w["shape"] for w in prog["weights"]]
    load_weights(module, pw)

    ref = case.torch_fn(x, *tw)
    out = module(x)
    assert list(out.shape) == prog["output"]["shape"]
    torch.testing.assert_close(out, ref, rtol=RTOL, atol=ATOL)

    grad_out = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, [x, *tw], grad_out)
    params = module_weights(module, len(tw))
    out_grads = torch.autograd.grad(out, [x, *params], grad_out)
    torch.testing.assert_close(out_grads[0], ref_grads[0], rtol=RTOL, atol=ATOL)
    # a weight layout change is a pure re-indexing, so it maps gradients the same way
    for g_mod, g_ref in zip(out_grads[1:], case.to_program(list(ref_grads[1:]))):
        torch.testing.assert_close(g_mod, g_ref, rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------------------------------------
# (b) generated module == reference evaluator of the oracle expr
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_reference_evaluator(case: Case):
    torch.manual_seed(1)
    prog = case.make()
    module = build_module(prog).double()
    x = torch.randn(prog["input"]["shape"], dtype=torch.float64)
    with torch.no_grad():
        out = module(x).numpy()
    ref = evaluate_reference(prog, x, module_weights(module, len(prog["weights"])))
    assert ref.shape == out.shape
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("grouped", "two_contract", "pixel_shuffle",
                                                                   "shift_stride", "broadcast")],
                         ids=lambda c: c.name)
def test_reference_vectorized_equals_loops(case: Case):
    torch.manual_seed(2)
    prog = case.make()
    x = torch.randn(prog["input"]["shape"], dtype=torch.float64)
    ws = [torch.randn(w["shape"], dtype=torch.float64) for w in prog["weights"]]
    np.testing.assert_allclose(evaluate_reference(prog, x, ws), evaluate_reference_loops(prog, x, ws),
                               rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------------------
# program bookkeeping: flops rule, JSON round trip, init, free dims
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_count_flops_matches_hand_count(case: Case):
    prog = case.make()
    assert count_flops(prog) == prog["flops"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_json_round_trip(case: Case):
    """JSON turns int keys (sizes, rename) into strings: both spellings must generate the same code."""
    prog = case.make()
    prog_json = json.loads(json.dumps(prog))
    assert program_to_source(prog_json) == program_to_source(prog)
    assert count_flops(prog_json) == count_flops(prog)


def test_free_batch_dim():
    """Dims in free_dims (the batch) may change size at run time; the others are fixed."""
    torch.manual_seed(3)
    for case in (CASES[0], CASES[2], CASES[6], CASES[7], CASES[8]):
        prog = case.make()
        module = build_module(prog)
        tw = [torch.randn(s) for s in case.torch_weight_shapes]
        load_weights(module, case.to_program(tw))
        for n in (1, 5):
            x = torch.randn([n] + prog["input"]["shape"][1:])
            with torch.no_grad():
                torch.testing.assert_close(module(x), case.torch_fn(x, *tw), rtol=RTOL, atol=ATOL)


def test_weight_init_matches_conv2d_default():
    """Issue 10 item 6: the conv-equivalent program starts as nn.Conv2d does (U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    std 1/sqrt(3 fan_in)), not at Kaiming's sqrt(2 / fan_in) (2.45x larger)."""
    torch.manual_seed(4)
    prog = conv2d_program(N=1, C_in=64, C_out=128, H=3, W=3)
    module = build_module(prog)
    w = module.w0.detach()
    assert list(w.shape) == [128, 64, 3, 3]
    assert isinstance(module.w0, torch.nn.Parameter)
    expected = 1 / math.sqrt(3 * 64 * 9)
    ref = torch.nn.Conv2d(64, 128, 3).weight.detach()
    assert abs(w.std().item() / expected - 1) < 0.03
    assert abs(ref.std().item() / expected - 1) < 0.03
    assert w.abs().max().item() <= 1 / math.sqrt(64 * 9) + 1e-7  # the same uniform bound as nn.Conv2d
    assert abs(w.mean().item()) < 0.05 * expected


def test_broadcast_dims_stay_virtual():
    """The expanded C_out dim is only consumed by the contraction: it must not be materialized before it."""
    src = program_to_source(broadcast_program())
    lines = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("t =")]
    products = [ln for ln in lines if "torch.mm(" in ln or "torch.bmm(" in ln]
    # T [0, 3] (2 and 7 broadcast) @ w0 [4, 3]^T: a plain mm, the broadcast dim 7 (size 2) summed as a factor
    assert len(products) == 1 and products[0].startswith("t = torch.mm(") and "* 2" in products[0]
    # only the final output needs the broadcast dim 8 stored (one expand, after the product)
    expands = [i for i, ln in enumerate(lines) if ".expand(" in ln]
    assert len(expands) == 1 and expands[0] > lines.index(products[0])
    assert not any(".mean(" in ln or ".sum(" in ln or "roll" in ln for ln in lines)


def test_shift_direction():
    """shift: out[e] = in[(e + 1) mod n] (torch.roll by -1)."""
    sizes = {0: 5, 1: 5}
    prog = program([0], [1], sizes, [{"op": "shift", "src": 0, "dst": 1}],
                   {"iterators": [5], "reductions": [], "mean": [], "input": [mod(add(it(0), const(1)), 5)],
                    "weights": []}, free_dims=(), flops=0)
    x = torch.arange(5.0)
    assert build_module(prog)(x).tolist() == [1.0, 2.0, 3.0, 4.0, 0.0]
    assert evaluate_reference(prog, x).tolist() == [1.0, 2.0, 3.0, 4.0, 0.0]


def test_contract_many_dims_and_one_sided_sums():
    """Contract steps are lowered without torch.einsum, so there is no 52-letter limit: one contraction over 53
    distinct dims (27 of T, 26 of the weight). T's dims 1..26 and all the weight's dims are summed from one
    operand only (not in out, not in the other operand): they are summed first (the IR itself sums bare
    reductions before contract steps, so sampled operators have none; the generator still handles them)."""
    t_dims, w_dims = list(range(27)), list(range(100, 126))
    sizes = {d: 1 for d in t_dims + w_dims}
    sizes[0] = 2
    sizes[1] = 2
    sizes[100] = 3
    sizes[200] = 2
    sizes[201] = 3
    steps = [{"op": "contract", "weight": 0, "rename": {0: 200}, "out": [200]},
             {"op": "expand", "dst": 201}]
    prog = program(t_dims, [200, 201], sizes, steps, expr=None, weights=[(w_dims, 1)], free_dims=(), flops=None)
    src = program_to_source(prog)
    assert "einsum" not in src
    assert "# summed from T only" in src and "self.w0.sum(" in src
    module = build_module(prog)
    x = torch.randn(prog["input"]["shape"])
    out = module(x)
    expected = x.reshape(2, -1).sum(1, keepdim=True) * module.w0.detach().sum()
    torch.testing.assert_close(out, expected.expand(2, 3))
    assert count_flops(prog) == 2 * 2 * 2 * 3


def test_contract_with_shared_batch_letters_uses_bmm():
    """Regression: einsum('abcde,efcdb->acdef') with T [2, 128, 16, 32, 64] and w [64, 2, 16, 32, 128] took
    20-30 s forward in torch.einsum (a bmm path that got operands with batch stride 1 and cloned them per batch)
    against 0.05 s for a contiguous bmm. The generator emits permute -> reshape -> contiguous -> torch.bmm ->
    reshape -> permute instead: B = {c, d, e} (in T, w and out), M = {a}, N = {f}, K = {b}. Checked on the
    source at the full shape, numerically (against torch.einsum and the oracle) at a small one."""

    def make(a, b, c, d, e, f):
        sizes = {0: a, 1: b, 2: c, 3: d, 4: e, 5: f}
        steps = [{"op": "contract", "weight": 0, "rename": {}, "out": [0, 2, 3, 4, 5]}]
        expr = {"iterators": [a, c, d, e, f], "reductions": [b], "mean": [False],
                "input": [it(0), red(0), it(1), it(2), it(3)], "weights": [[it(3), it(4), it(1), it(2), red(0)]]}
        return program([0, 1, 2, 3, 4], [0, 2, 3, 4, 5], sizes, steps, expr, weights=[([4, 5, 2, 3, 1], b)],
                       flops=2 * a * b * c * d * e * f)

    src = program_to_source(make(2, 128, 16, 32, 64, 2))
    assert "einsum" not in src
    products = [ln.strip() for ln in src.splitlines() if "torch.bmm(" in ln]
    assert len(products) == 1 and ".reshape(32768, -1, 128).contiguous()" in products[0], products

    torch.manual_seed(7)
    prog = make(3, 8, 2, 3, 4, 2)
    module = build_module(prog).double()
    x = torch.randn(prog["input"]["shape"], dtype=torch.float64, requires_grad=True)
    out = module(x)
    ref = torch.einsum("abcde,efcdb->acdef", x, module.w0)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), evaluate_reference(prog, x.detach(), [module.w0.detach()]),
                               rtol=1e-10, atol=1e-12)
    g = torch.randn_like(ref)
    got = torch.autograd.grad(out, [x, module.w0], g)
    want = torch.autograd.grad(ref, [x, module.w0], g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # the batch (dim 0, the M group) stays free
    x5 = torch.randn([5] + prog["input"]["shape"][1:], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(module(x5), torch.einsum("abcde,efcdb->acdef", x5, module.w0))
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(x5)
    assert counter.get_total_flops() == count_flops(make(5, 8, 2, 3, 4, 2)) == 2 * 5 * 8 * 2 * 3 * 4 * 2


def test_contract_with_two_free_dims():
    """Two run-time sized dims in the M group: their sizes are read from t.shape for the reshape back."""
    sizes = {0: 2, 1: 3, 2: 4, 3: 5}
    steps = [{"op": "contract", "weight": 0, "rename": {}, "out": [1, 3, 0]}]
    prog = program([0, 1, 2], [1, 3, 0], sizes, steps, expr=None, weights=[([3, 2], 4)], free_dims=(0, 1),
                   flops=2 * 2 * 3 * 4 * 5)
    src = program_to_source(prog)
    assert "size_0 = t.shape[0]" in src and "size_1 = t.shape[1]" in src
    module = build_module(prog)
    for shape in ((2, 3, 4), (5, 1, 4), (1, 7, 4)):
        x = torch.randn(shape)
        with torch.no_grad():
            torch.testing.assert_close(module(x), torch.einsum("abc,dc->bda", x, module.w0))
    dyn = {"x": {0: torch.export.Dim("a", min=1, max=64), 1: torch.export.Dim("b", min=1, max=64)}}
    ep = torch.export.export(module, (torch.randn(2, 3, 4),), dynamic_shapes=dyn)
    x = torch.randn(6, 5, 4)
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(x), module(x))


def test_invalid_programs_are_rejected():
    prog = conv2d_program()
    bad = copy.deepcopy(prog)
    bad["steps"][2]["out"] = [0, 9, 4]  # dim 6 left over: does not match output dims
    with pytest.raises(ValueError):
        program_to_source(bad)
    bad = copy.deepcopy(prog)
    bad["steps"][0]["src"] = 42
    with pytest.raises(ValueError):
        program_to_source(bad)
    bad = copy.deepcopy(prog)
    bad["steps"].append({"op": "transpose"})
    with pytest.raises(ValueError):
        program_to_source(bad)


# --------------------------------------------------------------------------------------------------------
# standalone source, torch.export, torch.compile, FlopCounterMode
# --------------------------------------------------------------------------------------------------------

def _conv_module_and_ref():
    torch.manual_seed(5)
    prog = conv2d_program()
    module = build_module(prog)
    return prog, module, lambda x: F.conv2d(x, module.w0, padding=1)


def test_source_is_standalone_importable(tmp_path):
    prog = conv2d_program()
    src = program_to_source(prog, class_name="MyConv", header="hand-written conv2d 3x3\nsecond line")
    assert src.startswith("# hand-written conv2d 3x3\n# second line\n")
    imports = [ln for ln in src.splitlines() if ln.startswith(("import ", "from "))]
    assert imports == ["import torch", "import torch.nn.functional as F"]
    path = tmp_path / "generated_conv.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("generated_conv", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module = mod.MyConv()
    assert [n for n, _ in module.named_parameters()] == ["w0"]
    x = torch.randn(prog["input"]["shape"])
    with torch.no_grad():
        torch.testing.assert_close(module(x), F.conv2d(x, module.w0, padding=1), rtol=RTOL, atol=ATOL)
        # same code as build_module: same output on the same weights
        built = build_module(prog)
        built.load_state_dict(module.state_dict())
        torch.testing.assert_close(built(x), module(x), rtol=0, atol=0)


def test_torch_export_conv_dynamic_batch():
    prog, module, ref = _conv_module_and_ref()
    x = torch.randn(prog["input"]["shape"])
    batch = torch.export.Dim("batch", min=1, max=1024)
    ep = torch.export.export(module, (x,), dynamic_shapes={"x": {0: batch}})
    for n in (2, 3, 7):
        xn = torch.randn([n] + prog["input"]["shape"][1:])
        with torch.no_grad():
            torch.testing.assert_close(ep.module()(xn), ref(xn), rtol=RTOL, atol=ATOL)


def test_torch_compile_conv():
    prog, module, ref = _conv_module_and_ref()
    compiled = torch.compile(module, fullgraph=True)
    x = torch.randn(prog["input"]["shape"], requires_grad=True)
    out = compiled(x)
    expected = ref(x)
    torch.testing.assert_close(out, expected, rtol=RTOL, atol=ATOL)
    g = torch.randn_like(out)
    gx, gw = torch.autograd.grad(out, [x, module.w0], g)
    rx, rw = torch.autograd.grad(expected, [x, module.w0], g)
    torch.testing.assert_close(gx, rx, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(gw, rw, rtol=RTOL, atol=ATOL)


def test_flop_counter_matches_count_flops():
    """torch.utils.flop_counter counts only matmul-like ops (mm/bmm/addmm/conv/attention): a contract step with
    a summed letter (K group not empty) is one torch.mm/bmm (or F.conv2d, for the unfold-unfold-contract
    pattern) of exactly 2 * prod(letter sizes) FLOPs (even with an empty M or N group: a matrix-vector bmm is
    counted the same), so it agrees with count_flops on a program without reduce steps. It does NOT count
    reductions (sum/mean: count_flops charges numel(T)), elementwise ops (the broadcast `*` of a contract step
    that sums nothing, the `* factor` of a broadcast sum) or views/pads/rolls (0 in both)."""
    from torch.utils.flop_counter import FlopCounterMode

    prog, module, _ = _conv_module_and_ref()
    x = torch.randn(prog["input"]["shape"])
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(x)
    assert counter.get_total_flops() == count_flops(prog) == prog["flops"] == 2 * 2 * 4 * 6 * 6 * 3 * 3 * 3

    prog = two_contract_program()
    module = build_module(prog)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.randn(prog["input"]["shape"]))
    assert counter.get_total_flops() == count_flops(prog)

    prog = depthwise_program()  # F.conv2d(..., groups=C): counted as 2 * N * C * H * W * 9 as well
    module = build_module(prog)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.randn(prog["input"]["shape"]))
    assert counter.get_total_flops() == count_flops(prog) == prog["flops"]

    # B = {1}, M = {0}, K = {2}, N empty: a matrix-vector bmm [3, N, 4] @ [3, 4, 1], counted all the same
    sizes = {0: 2, 1: 3, 2: 4}
    steps = [{"op": "contract", "weight": 0, "rename": {}, "out": [0, 1]}]
    prog = program([0, 1, 2], [0, 1], sizes, steps, expr=None, weights=[([1, 2], 4)], flops=2 * 2 * 3 * 4)
    module = build_module(prog)
    x = torch.randn(2, 3, 4)
    assert "torch.bmm(" in program_to_source(prog)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = module(x)
    torch.testing.assert_close(out, (x * module.w0.detach()).sum(2))
    assert counter.get_total_flops() == count_flops(prog) == prog["flops"]

    # a contract step that sums nothing (K empty) is a broadcast elementwise product: not counted
    sizes = {0: 2, 1: 3, 2: 4}
    steps = [{"op": "contract", "weight": 0, "rename": {}, "out": [0, 1, 2]}]
    prog = program([0, 1], [0, 1, 2], sizes, steps, expr=None, weights=[([1, 2], 1)], flops=2 * 2 * 3 * 4)
    module = build_module(prog)
    x = torch.randn(2, 3)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = module(x)
    torch.testing.assert_close(out, x[:, :, None] * module.w0.detach())
    assert counter.get_total_flops() == 0 and count_flops(prog) == prog["flops"]

    prog = avgpool_program()  # only reductions: uncounted by FlopCounterMode
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        build_module(prog)(torch.randn(prog["input"]["shape"]))
    assert counter.get_total_flops() == 0
    assert count_flops(prog) == 2 * 3 * 6 * 6 + 2 * 3 * 3 * 6


@pytest.mark.parametrize("case", CASES[1:], ids=IDS[1:])
def test_torch_export_all_cases_dynamic_batch(case: Case):
    """Every lowering (roll, ::s slicing, pad+unfold, unflatten/flatten, broadcast expand) exports with a
    dynamic batch dim."""
    torch.manual_seed(6)
    prog = case.make()
    module = build_module(prog)
    x = torch.randn(prog["input"]["shape"])
    ep = torch.export.export(module, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=1024)}})
    xn = torch.randn([5] + prog["input"]["shape"][1:])
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(xn), module(xn), rtol=RTOL, atol=ATOL)


def test_split_of_a_free_dim():
    """A free dim split into (free outer, fixed inner) is reshaped with -1: out = x.reshape(-1, 2, C).mean(1)."""
    sizes = {0: 4, 1: 3, 5: 2, 6: 2}
    steps = [{"op": "split", "src": 0, "dst": [5, 6]}, {"op": "reduce", "src": 6, "mean": True}]
    expr = {"iterators": [2, 3], "reductions": [2], "mean": [True],
            "input": [add(mul(it(0), 2), red(0)), it(1)], "weights": []}
    prog = program([0, 1], [5, 1], sizes, steps, expr, free_dims=(0, 5), flops=12)
    assert count_flops(prog) == 12
    module = build_module(prog)
    x = torch.randn(4, 3, dtype=torch.float64)
    np.testing.assert_allclose(module(x).numpy(), evaluate_reference(prog, x), rtol=1e-12)
    x = torch.randn(10, 3)
    torch.testing.assert_close(module(x), x.reshape(5, 2, 3).mean(1))


# --------------------------------------------------------------------------------------------------------
# lowering of contract steps: torch.mm/bmm (no einsum), F.conv2d for the unfold-unfold-contract pattern
# --------------------------------------------------------------------------------------------------------

def _interpret(prog: dict, x: torch.Tensor, weights) -> torch.Tensor:
    """A direct reading of §2 for unfold/contract-only programs (pad + unfold, then torch.einsum)."""
    dims, t = list(prog["input"]["dims"]), x
    for st in prog["steps"]:
        if st["op"] == "unfold":
            p, k = dims.index(st["src"]), st["window"]
            padding = [0, 0] * (t.dim() - 1 - p) + [k // 2, k // 2]
            t = F.pad(t, padding).unfold(p, k, 1).movedim(-1, p + 1)
            dims[p:p + 1] = st["dst"]
        else:
            assert st["op"] == "contract"
            dims = [st["rename"].get(d, d) for d in dims]
            letters = {d: chr(ord("a") + i) for i, d in enumerate(dict.fromkeys(
                dims + prog["weights"][st["weight"]]["dims"] + st["out"]))}
            eq = ("".join(letters[d] for d in dims) + ","
                  + "".join(letters[d] for d in prog["weights"][st["weight"]]["dims"]) + "->"
                  + "".join(letters[d] for d in st["out"]))
            t = torch.einsum(eq, t, weights[st["weight"]])
            dims = list(st["out"])
    return t.permute([dims.index(d) for d in prog["output"]["dims"]])


def _conv_pattern_program(rng: np.random.Generator, spatial: int = 2) -> dict:
    """unfold, unfold, contract in random layouts: batch n (free), optional extra M dim e, groups g (B),
    input channels c (K), output channels o (N), windows of size 1, 3 or 5, either unfold order, renames.
    ``spatial=1``: unfold, contract (a conv1d over h; w is kept as another M dim)."""
    n, h, w, e, g, c, o = 0, 1, 2, 3, 4, 5, 6
    sizes = {n: 2, h: 5, w: 4, e: 2, g: 2, c: 3, o: 3}
    pre = [n, h, w] + [d for d in (e, g, c) if rng.random() < 0.6]
    pre = [pre[i] for i in rng.permutation(len(pre))]
    kh, kw = (int(v) for v in rng.choice([1, 3, 5], 2))
    sizes.update({10: 5, 11: kh, 12: 4, 13: kw, 21: kh, 22: kw, 25: 3})
    unfolds = [{"op": "unfold", "src": h, "dst": [10, 11], "window": kh},
               {"op": "unfold", "src": w, "dst": [12, 13], "window": kw}]
    if spatial == 1:
        unfolds = unfolds[:1]
    if rng.random() < 0.5:
        unfolds.reverse()
    rename = {11: 21, 13: 22} if spatial == 2 else {11: 21}
    wc = c
    if c in pre and rng.random() < 0.5:
        rename[c] = wc = 25
    windows, mains = ([21, 22], [10, 12]) if spatial == 2 else ([21], [10, w])
    wd = [d for d in (g, wc) if d in pre or d == wc and c in pre] + windows + ([o] if rng.random() < 0.7 else [])
    wd = [wd[i] for i in rng.permutation(len(wd))]
    out = [n, *mains] + [d for d in (e, g) if d in pre] + [d for d in wd if d == o]
    out = [out[i] for i in rng.permutation(len(out))]
    contract = {"op": "contract", "weight": 0, "rename": rename, "out": out}
    return program(pre, out, sizes, unfolds + [contract], expr=None, weights=[(wd, 1)], flops=None)


@pytest.mark.parametrize("spatial", [2, 1])
def test_conv_pattern_lowers_to_conv2d_and_matches(spatial: int):
    """unfold + unfold + contract summing both windows = F.conv2d on the tensor before the unfolds (groups for B
    letters, any layout, either unfold order): the same function as pad/unfold/einsum (float64, 1e-12), also
    with another batch size; the hand-written conv2d/depthwise/grouped programs take this path too. One unfold +
    contract summing its window = F.conv1d, alike."""
    for make in (conv2d_program, depthwise_program, grouped_program):
        src = program_to_source(make())
        assert "F.conv2d(" in src and "torch.mm(" not in src and "torch.bmm(" not in src
    rng = np.random.default_rng(0)
    groups_seen = set()
    for _ in range(40):
        prog = _conv_pattern_program(rng, spatial)
        src = program_to_source(prog)
        assert f"F.conv{spatial}d(" in src and "einsum" not in src and "unfold(" not in src, src
        groups_seen.add("groups=" in src)
        module = build_module(prog).double()
        for batch in (2, 3):
            shape = [batch if d == 0 else s for d, s in zip(prog["input"]["dims"], prog["input"]["shape"])]
            x = torch.randn(shape, dtype=torch.float64)
            with torch.no_grad():
                got, want = module(x), _interpret(prog, x, [module.w0])
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert groups_seen == {True, False}


def test_conv_pattern_not_taken_when_a_window_is_kept():
    """A window dim kept in the output (not summed) is not a convolution: mm/bmm, same function."""
    prog = conv2d_program()
    prog["steps"][2] = {"op": "contract", "weight": 0, "rename": {1: 10, 5: 11}, "out": [0, 9, 4, 6, 7]}
    prog["weights"][0] = {"dims": [9, 10, 11], "shape": [4, 3, 3], "fan_in": 9}
    prog["output"] = {"dims": [0, 9, 4, 6, 7], "shape": [2, 4, 6, 6, 3]}
    src = program_to_source(prog)
    assert "F.conv2d" not in src and "torch.mm(" in src
    module = build_module(prog).double()
    x = torch.randn(prog["input"]["shape"], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(module(x), _interpret(prog, x, [module.w0]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [two_contract_program, shift_stride_program, broadcast_program],
                         ids=lambda f: f.__name__)
def test_torch_compile_mm_lowering(make):
    """torch.compile (fullgraph) of the mm/bmm lowering, forward and gradients, against eager."""
    torch.manual_seed(8)
    prog = make()
    module = build_module(prog)
    compiled = torch.compile(module, fullgraph=True)
    x = torch.randn(prog["input"]["shape"], requires_grad=True)
    out, ref = compiled(x), module(x)
    torch.testing.assert_close(out, ref, rtol=RTOL, atol=ATOL)
    g = torch.randn_like(out)
    params = list(module.parameters())
    for a, b in zip(torch.autograd.grad(out, [x, *params], g), torch.autograd.grad(ref, [x, *params], g)):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
