"""Random operators: the generated PyTorch module agrees with the reference evaluator of the oracle.

For 240 operators sampled (several seeds) across four specs -- conv2d, matmul, 1-D and pooling-shaped --
``op.to_module()`` (float64) must equal ``tests/reference_eval.evaluate_reference(program, x, weights)``, which
evaluates the bottom-up index expressions of ``program["expr"]`` directly (docs/architecture.md §1).

FLOPs. ``op.flops()`` follows the IR's rule (§2): each contract step costs 2·Π|letters| (all dims of T after
the rename, of the weight and of the output), each reduce step numel(T). We re-derive both parts from the
program's steps and check their sum is ``op.flops()`` exactly (where the planner multiplied two weights first,
the steps no longer hold the canonical contractions: there the planned count is re-derived and checked against
``count_flops``, and test_plan.py checks ``op.flops()`` of such an operator by hand). The generator lowers each
contract step with a summed letter (K = letters of both T and the weight, not in the output) to one
``torch.mm``/``torch.bmm`` over the letters B (T & w & out), M (T & out), N (w & out), K -- or, for unfold +
unfold + contract summing both windows, one ``F.conv2d`` (groups = B): ``torch.utils.flop_counter.FlopCounterMode``
counts either as 2·Π|those letters| (also when M or N is empty: k ≥ 1 is enough). FlopCounter counts only matrix
products (mm/bmm/conv...), so on the generated module it does NOT count:

* reductions (``t.sum``/``t.mean``: the reduce steps) -- nor the sums of a letter found in one operand only and
  not in the output, which the generator does first (``t.sum`` / ``w.sum``; the IR sums bare reductions before
  contract steps, so the sampled operators have none);
* contractions with no summed letter shared by both operands (an outer product, or a share without a
  reduction, e.g. ``'abc,bc->abc'``): the generator emits a broadcast elementwise ``*`` (faster than a bmm
  with k = 1);
* broadcast (expanded) dims that the generator keeps out of the product (replaced by a constant factor).

So we assert, per operator, FlopCounter == Σ over contract steps with a shared summed letter of 2·Π|letters
of the mm/bmm| (exact, tolerance 0), FlopCounter ≤ the contraction part of ``op.flops()``, and equality with
the contraction part where no contract step falls in the three cases above.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _syno_helpers import RANDOM_SPECS, random_spec_space
from reference_eval import evaluate_reference
from torch.utils.flop_counter import FlopCounterMode

from syno_automl.ir import count_flops

SEEDS = (11, 12, 13)
PER_SEED = 25  # 4 specs x 3 seeds x 25 samples, ~230 distinct operators


_cache: dict[str, list] = {}


def operators(name: str) -> list:
    if name not in _cache:
        space = random_spec_space(name)
        ops = {}
        for seed in SEEDS:
            for op in space.sample(PER_SEED, seed=seed):
                ops.setdefault(op.hash, op)
        _cache[name] = list(ops.values())
    return _cache[name]


# --------------------------------------------------------------------------------------------------------
# FLOPs re-derived from the program's steps
# --------------------------------------------------------------------------------------------------------

def viewed_dims(weight: dict) -> list[int]:
    """A weight's dims after its ``views`` (docs/architecture.md §2: the planner's views before the product)."""
    dims = [int(d) for d in weight["dims"]]
    for v in weight.get("views", []):
        if v["op"] in ("split", "unfold"):
            i = dims.index(v["src"])
            dims[i:i + 1] = list(v["dst"])
        elif v["op"] == "merge":
            (a, b), d = v["src"], v["dst"]
            dims.remove(b)
            dims[dims.index(a)] = d
        elif v["op"] == "contract":  # a product with another weight: its letters are out
            dims = [int(d) for d in v["out"]]
        else:  # shift, stride
            dims[dims.index(v["src"])] = v["dst"]
    return dims


def weight_products(weight: dict) -> bool:
    """Whether the planner contracts this weight with another one first (a ``contract`` among its views)."""
    return any(v["op"] == "contract" for v in weight.get("views", []))


def matmul_count(phys: list[int], w: list[int], out: list[int], sizes: dict) -> tuple[int, bool]:
    """What FlopCounterMode sees of one contraction as the generator emits it, and whether that is a matrix
    product over all its letters."""
    summed_shared = (set(phys) & set(w)) - set(out)
    one_sided = (set(phys) ^ set(w)) - set(out)  # summed first (t.sum / w.sum)
    if not summed_shared:
        return 0, False  # broadcast elementwise *
    kept = (set(phys) | set(w)) - one_sided
    return 2 * math.prod(sizes[d] for d in kept), not one_sided


def flops_parts(program: dict) -> dict:
    """Walks the steps on T's logical dims (and which are broadcast, as the generator keeps them).

    Returns the IR cost of the contract steps and of the reduce steps, and what FlopCounterMode should see:
    per contract step, 2·Π|letters of the mm/bmm/conv2d| when the generator emits one (a summed letter shared
    by both operands), else 0 (a broadcast elementwise product)."""
    sizes = {int(k): int(v) for k, v in program["sizes"].items()}
    dims = [int(d) for d in program["input"]["dims"]]
    virtual: set[int] = set()
    contract, reduce, counted, planned = [], [], [], []
    exact = True  # every contract step is a matrix product over all its letters
    for weight in program["weights"]:  # the planner's products of weights, computed before x's steps
        if weight_products(weight):
            exact = False
            wd = [int(d) for d in weight["dims"]]
            for v in weight["views"]:
                if v["op"] == "contract":
                    ren = {int(k): int(x) for k, x in v["rename"].items()}
                    wd = [ren.get(d, d) for d in wd]
                    other = viewed_dims(program["weights"][v["weight"]])
                    counted.append(matmul_count(wd, other, v["out"], sizes)[0])
                    planned.append(2 * math.prod(sizes[d] for d in set(wd) | set(other) | set(v["out"])))
                wd = viewed_dims({"dims": wd, "views": [v]})
    for st in program["steps"]:
        op = st["op"]
        if op in ("split", "unfold"):
            src, dst = st["src"], list(st["dst"])
            i = dims.index(src)
            dims[i:i + 1] = dst
            if src in virtual:
                virtual.discard(src)
                if op == "split":
                    virtual.update(dst)  # a split broadcast dim stays broadcast; unfold materializes it
        elif op == "merge":
            (a, b), d = st["src"], st["dst"]
            both = a in virtual and b in virtual
            virtual -= {a, b}
            dims.remove(b)
            dims[dims.index(a)] = d
            if both:
                virtual.add(d)
        elif op in ("shift", "stride"):
            dims[dims.index(st["src"])] = st["dst"]
            if st["src"] in virtual:
                virtual.discard(st["src"])
                virtual.add(st["dst"])
        elif op == "expand":
            dims.append(st["dst"])
            virtual.add(st["dst"])
        elif op == "reduce":
            reduce.append(math.prod(sizes[d] for d in dims))
            dims.remove(st["src"])
            virtual.discard(st["src"])
        elif op == "contract":
            ren = {int(k): int(v) for k, v in st["rename"].items()}
            dims = [ren.get(d, d) for d in dims]
            virtual = {ren.get(d, d) for d in virtual}
            param = [int(d) for d in program["weights"][st["weight"]]["dims"]]
            w = viewed_dims(program["weights"][st["weight"]])  # what the contraction reads (the planner's views)
            out = [int(d) for d in st["out"]]
            # the paper's count: 2·Π|T ∪ w ∪ out| of the canonical step, where out ⊆ T ∪ w; the planner's weight
            # views change w and out but neither T here nor the parameter, so it is 2·Π|T ∪ parameter|
            contract.append(2 * math.prod(sizes[d] for d in set(dims) | set(param)))
            planned.append(2 * math.prod(sizes[d] for d in set(dims) | set(w) | set(out)))  # the §2 rule, as planned
            phys = [d for d in dims if d not in virtual]
            count, matmul = matmul_count(phys, w, out, sizes)
            counted.append(count)
            if virtual or not matmul:
                exact = False
            virtual = {d for d in out if d in virtual and d not in w}
            dims = out
    return {"contract": sum(contract), "reduce": sum(reduce), "counted": sum(counted), "exact": exact,
            "planned": sum(planned)}


# --------------------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------------------

def test_enough_operators():
    total = sum(len(operators(name)) for name in RANDOM_SPECS)
    assert total >= 200, total
    for name in RANDOM_SPECS:
        assert len(operators(name)) >= 40, (name, len(operators(name)))


@pytest.mark.parametrize("name", list(RANDOM_SPECS))
def test_module_matches_reference(name):
    """float64 module output == the oracle on random inputs and weights, for every sampled operator."""
    gen = torch.Generator().manual_seed(0)
    failures = []
    for op in operators(name):
        program = op.program(0)
        module = op.to_module(0).double()
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
        x = torch.randn(program["input"]["shape"], generator=gen, dtype=torch.float64)
        with torch.no_grad():
            got = module(x).numpy()
        want = evaluate_reference(program, x, list(module.parameters()))
        assert got.shape == tuple(program["output"]["shape"]), (op.hash, got.shape)
        if not np.allclose(got, want, rtol=1e-10, atol=1e-10):
            failures.append((op.hash, float(np.abs(got - want).max()), str(op)))
    assert not failures, failures[:3]


@pytest.mark.parametrize("name", list(RANDOM_SPECS))
def test_flops(name):
    for op in operators(name):
        program = op.program(0)
        parts = flops_parts(program)
        if any(weight_products(w) for w in program["weights"]):
            # two contractions became one of x with a product of weights (the planner): the steps no longer hold
            # the canonical ones, so op.flops() is checked by hand in test_plan.py, and the planned IR count here
            assert parts["planned"] + parts["reduce"] == count_flops(program), op.hash
            assert op.flops(0) == program["flops"], op.hash
        else:
            assert parts["contract"] + parts["reduce"] == op.flops(0) == program["flops"], op.hash
        module = op.to_module(0).double()
        x = torch.randn(program["input"]["shape"], dtype=torch.float64)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            module(x)
        counted = counter.get_total_flops()
        assert counted == parts["counted"], (op.hash, counted, parts, str(op))
        assert counted <= parts["contract"], op.hash
        if parts["exact"]:  # matrix products over all their letters: FlopCounter sees the planned count, which
            # is the paper's unless the planner moved a selection onto a weight (a strided weight: fewer letters)
            assert counted == parts["planned"], op.hash


def test_flops_exact_cases_exist():
    """Some sampled operators are pure matrix products, where FlopCounter == the whole contraction part."""
    exact = sum(flops_parts(op.program(0))["exact"] for name in RANDOM_SPECS for op in operators(name))
    assert exact >= 5, exact


def test_flops_known_conv2d_exact():
    """The conv-equivalent operator: FlopCounter counts exactly op.flops() minus the (absent) reductions."""
    from syno_automl import known

    space = random_spec_space("conv2d")
    op = known.conv2d(space)
    program = op.program(0)
    parts = flops_parts(program)
    assert parts["exact"] and parts["reduce"] == 0
    module = op.to_module(0)
    x = torch.randn(program["input"]["shape"])
    with FlopCounterMode(display=False) as counter:
        module(x)
    m = RANDOM_SPECS["conv2d"][4]
    assert counter.get_total_flops() == op.flops(0) == 2 * m["N"] * m["C_out"] * m["H"] * m["W"] * m["C_in"] * 9

    space = random_spec_space("matmul")
    op = known.linear(space)
    with FlopCounterMode(display=False) as counter:
        op.to_module(0)(torch.randn(op.program(0)["input"]["shape"]))
    m = RANDOM_SPECS["matmul"][4]
    assert counter.get_total_flops() == op.flops(0) == 2 * m["N"] * m["C_in"] * m["C_out"]


@pytest.mark.parametrize("name", ["conv2d", "matmul", "conv1d"])
def test_batch_is_free(name):
    """The batch dim (N: 0) is free at run time: other batch sizes agree with the oracle at its own N."""
    op = operators(name)[0]
    module = op.to_module(0).double()
    mapping = dict(RANDOM_SPECS[name][4])
    for n in (1, 5):
        program = op.program({**mapping, "N": n})
        x = torch.randn(program["input"]["shape"], dtype=torch.float64)
        with torch.no_grad():
            got = module(x).numpy()
        np.testing.assert_allclose(got, evaluate_reference(program, x, list(module.parameters())), rtol=1e-10,
                                   atol=1e-10)


def test_torch_export_sample():
    """torch.export works (dynamic batch) on a sample of operators of every spec."""
    for name in RANDOM_SPECS:
        for op in operators(name)[:3]:
            program = op.program(0)
            module = op.to_module(0)
            x = torch.randn(program["input"]["shape"])
            batch = torch.export.Dim("batch", min=1, max=256)
            ep = torch.export.export(module, (x,), dynamic_shapes={"x": {0: batch}})
            x2 = torch.randn([3, *program["input"]["shape"][1:]])
            torch.testing.assert_close(ep.module()(x2), module(x2), rtol=1e-5, atol=1e-5)
