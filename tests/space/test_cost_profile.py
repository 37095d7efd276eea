"""Cost profiles per speed target (syno_automl.cost_profile, native/cost.hpp CostProfile, issue 24 part 3).

* cpu.eager is today's cost, exactly (FLOPs + 256 x elements materialized), natively and in Python;
* a profile round-trips through its file, and a malformed or foreign one is refused naming the file and field;
* under the cuda profiles the partial-node cost bound never exceeds the cost of an operator below (as
  tests/space/test_cost_bound.py checks for today's), and pruning with it keeps every operator;
* substitute(target=...) budgets with the profile; calibrate() on a small CPU space writes a loadable profile.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from _syno_helpers import assert_cost_bounds_hold
from torch import nn

from syno_automl import Operator, OperatorSpace
from syno_automl.calibrate import calibrate
from syno_automl.cost_profile import SHIPPED, CostProfile, load, resolve
from syno_automl.errors import CostProfileError, SynoError
from syno_automl.placeholder import layer_cost, substitute

SPEC = ("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in: 2", "C_out: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
        [{"N": 2, "C_in": 4, "C_out": 4, "L": 12}, {"N": 3, "C_in": 2, "C_out": 6, "L": 6}])


def space(**options) -> OperatorSpace:
    inp, out, primary, coefficients, mappings = SPEC
    return OperatorSpace(inp, out, primary, coefficients, mappings, threads=1, **options)


def test_cpu_eager_is_todays_cost_exactly():
    plain, profiled = space(max_depth=5), space(max_depth=5, cost_profile="cpu.eager")
    ops = plain.enumerate(max_operators=300).operators
    assert len(ops) > 50
    for op in ops:
        twin = profiled.replay(op.path).to_operator()
        assert twin.total_cost() == op.total_cost()
        for i in range(plain.num_mappings):
            c = op.cost(i)
            assert c["total"] == c["flops"] + 256 * c["materialized"]
            assert op.cost(i, target="cpu.eager")["total"] == c["total"]


@pytest.mark.parametrize("target", ["cuda.eager", "cuda.compiled"])
def test_native_and_python_totals_agree(target):
    sp = space(max_depth=5, cost_profile=target, max_counts={"UNFOLD": 1, "SHIFT": 1})
    for op in sp.enumerate(max_operators=200).operators:
        summed = sum(op.cost(i)["total"] for i in range(sp.num_mappings))
        assert summed == pytest.approx(op.total_cost(), rel=1e-12)
        assert op.cost(0)["total"] == pytest.approx(op.cost(0, target=target)["total"], rel=1e-12)


def test_compiled_fuses_view_copies():
    """Fusion only removes copies: a compiled profile never prices an operator above the same coefficients eager."""
    eager = resolve("cuda.eager")
    compiled = CostProfile(**{**eager.__dict__, "target": "cuda.compiled"})
    sp = space(max_depth=5, max_counts={"UNFOLD": 1, "SHIFT": 2})
    fused_somewhere = False
    for op in sp.enumerate(max_operators=300).operators:
        c = op.cost(0)
        assert compiled.total(c) <= eager.total(c) * (1 + 1e-12)
        fused_somewhere |= c["fused_copy_kernels"] < c["copy_kernels"]
    assert fused_somewhere


@pytest.mark.parametrize("target", ["cuda.eager", "cuda.compiled"])
@pytest.mark.parametrize("max_depth, counts", [(4, {}), (5, {"UNFOLD": 1, "SHIFT": 1}), (4, {"EXPAND": 1})])
def test_bound_is_sound_under_the_profile(target, max_depth, counts):
    sp = space(max_depth=max_depth, max_counts=counts, max_weights=2, cost_profile=target)
    ops = sp.enumerate(max_operators=300).operators
    assert ops and assert_cost_bounds_hold(sp, ops) > 0


@pytest.mark.parametrize("target", SHIPPED)
@pytest.mark.parametrize("counts", [{}, {"EXPAND": 1}])
def test_the_space_wide_cost_floor_is_priced_by_the_profile(target, counts):
    """budget_bounds' min_cost (what refuses a max_cost up front) is under every operator's cost on the profile's
    own scale: it once priced cpu.eager's counts under every profile, and so refused every cuda.compiled budget
    (an inference profile in ns, whose costs are far below cpu.eager's FLOPs)."""
    inp, out, primary, coefficients, _ = SPEC
    large = [{"N": 128, "C_in": 64, "C_out": 64, "L": 1024}]  # a real layer's sizes: FLOPs dwarf a launch
    options = dict(max_depth=5, max_weights=2, max_counts=counts, cost_profile=target, threads=1)
    sp = OperatorSpace(inp, out, primary, coefficients, large, **options)
    floor = sp._native.budget_bounds()["min_cost"]
    ops = sp.enumerate(max_operators=300).operators
    assert len(ops) > 20 and floor > 0
    cheapest = min(op.total_cost() for op in ops)
    assert floor <= cheapest * (1 + 1e-9)
    # a budget some operator meets is not proven empty
    assert OperatorSpace(inp, out, primary, coefficients, large, max_cost=cheapest * 1.01,
                         **options)._budget_conflict is None


@pytest.mark.parametrize("target", ["cuda.eager", "cuda.compiled"])
def test_cost_pruning_keeps_every_operator_under_the_profile(target):
    options = dict(max_depth=5, max_weights=2, max_counts={"SHIFT": 1, "UNFOLD": 1, "STRIDE": 1}, cost_profile=target)
    costs = sorted(op.total_cost() for op in space(**options).enumerate(max_operators=10**6).operators)
    limit = costs[len(costs) // 5]
    pruned = space(**options, max_cost=limit).enumerate(max_operators=0)
    unpruned = space(**options, max_cost=limit, cost_pruning=False).enumerate(max_operators=0)
    assert pruned.hashes == unpruned.hashes and pruned.hashes
    assert sum(pruned.nodes_per_depth) <= sum(unpruned.nodes_per_depth)


@pytest.mark.parametrize("target", SHIPPED)
def test_shipped_profiles_round_trip(target, tmp_path):
    profile = resolve(target)
    assert profile.target == target and profile.device and profile.torch and profile.date and profile.source
    path = profile.save(tmp_path / "p.json")
    assert load(path) == profile
    assert resolve(str(path)) == profile and resolve(profile) is profile
    assert resolve(profile.to_dict()) == profile


def _doc(**changes):
    doc = resolve("cuda.eager").to_dict()
    for key, value in changes.items():
        if key.startswith("coefficients."):
            name = key.split(".", 1)[1]
            if value is KeyError:
                del doc["coefficients"][name]
            else:
                doc["coefficients"][name] = value
        elif value is KeyError:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize("text, field", [
    ("{not json", "not JSON"),
    ('["a list"]', "JSON object"),
    (_doc(format="syno-cost-profile/2"), "'format'"),
    (_doc(format=KeyError), "'format'"),
    (_doc(target="tpu.eager"), "'target'"),
    (_doc(coefficients=KeyError), "'coefficients'"),
    (_doc(**{"coefficients.launch": KeyError}), "coefficients.launch"),
    (_doc(**{"coefficients.element": -1.0}), "coefficients.element"),
    (_doc(**{"coefficients.flop": "1e-6"}), "coefficients.flop"),
    (_doc(**{"coefficients.read": math.inf}).replace("Infinity", "1e999"), "coefficients.read"),
    (_doc(**{"coefficients.warp": 1.0}), "'warp'"),
    (_doc(device=3), "'device'"),
])
def test_malformed_profiles_name_the_file_and_field(text, field, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CostProfileError, match=field) as info:
        load(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, SynoError) and isinstance(info.value, ValueError)


def test_unknown_targets_are_refused():
    with pytest.raises(CostProfileError, match="neither a shipped target"):
        resolve("cuda.fast")
    with pytest.raises(CostProfileError, match="not a known target"):
        space(cost_profile={"format": "syno-cost-profile/1", "target": "gpu", "coefficients": {}})
    op = space(max_depth=4).sample(1, seed=0)[0]
    with pytest.raises(CostProfileError):
        op.cost(0, target="/no/such/profile.json")


def _conv_model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False)), torch.randn(4, 8, 8, 8)


def test_substitute_budgets_with_the_target():
    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, cost_ratio=2.0, target="cuda.compiled", max_depth=5)
    profile = resolve("cuda.compiled")
    assert sub.space.cost_profile == profile
    assert sub.baseline_cost == pytest.approx(
        profile.layer_cost(2 * 4 * 8 * 8 * 8 * 8 * 9, 4 * 8 * 8 * 8, 4 * 8 * 8 * 8, 8 * 8 * 9))
    assert sub.space.budgets["max_cost"] == pytest.approx(2.0 * sub.baseline_cost)
    ops = sub.space.sample(8, seed=0)
    assert ops
    for op in ops:  # the ratio the budget limits is the profile's
        assert sub.cost_ratio(op) <= 2.0 * (1 + 1e-9)
        assert sub.operator_cost(op) == pytest.approx(op.total_cost(), rel=1e-12)


def test_conv_equivalent_costs_what_layer_cost_says_under_every_profile():
    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None, max_depth=5)
    layer = sub.placeholders[0][1].referred_layer
    for target in SHIPPED:
        profile = resolve(target)
        assert layer_cost(2 * 4 * 8 * 8 * 8 * 8 * 9, (4, 8, 8, 8), layer.weight.numel(), input_shape=(4, 8, 8, 8),
                          profile=profile) == pytest.approx(profile.layer_cost(
                              2 * 4 * 8 * 8 * 8 * 8 * 9, 4 * 8 * 8 * 8, 4 * 8 * 8 * 8, layer.weight.numel()))


@pytest.mark.parametrize("target", SHIPPED)
def test_the_conv_itself_costs_its_layer_cost(target):
    """cost_ratio 1 is the replaced layer: the conv-equivalent operator's planned cost under each profile (training
    or inference) is what CostProfile.layer_cost charges the conv."""
    from syno_automl import known

    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None, max_depth=6, target=target)
    conv = known.conv2d(sub.space)
    assert sub.cost_ratio(conv) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("target", SHIPPED)
def test_a_replayed_operator_is_priced_by_the_space_profile(target):
    """An operator loaded from JSON (the search's opening, a resumed study, another process) lives in the space's
    structural twin; the twin once dropped the profile, and the grouped conv of a cuda.compiled ResNet-18 space was
    priced on cpu.eager, 192,524x its layers. Replayed or walked, the conv costs its layer and the 2-group conv less."""
    from syno_automl import known

    model, x = _conv_model()
    small = substitute(model, nn.Conv2d, x, cost_ratio=None, max_depth=8, target=target).space
    n, c, h, k = 128, 64, 32, 3  # ResNet-18's first 3x3 convs at 32x32, batch 128
    sp = small.with_mappings([{"N": n, "C_in": c, "C_out": c, "H": h, "W": h, "k": k}])
    layer = resolve(target).layer_cost(2 * n * c * c * k * k * h * h, n * c * h * h, n * c * h * h, c * c * k * k)
    for op, flops_ratio in ((known.conv2d(sp), 1.0), (known.grouped_conv2d(sp, "s"), 0.5)):
        replayed = Operator.from_json(sp, op.to_json())
        assert replayed.cost(0) == op.cost(0) and replayed.total_cost() == op.total_cost()
        ratio = replayed.cost(0)["total"] / layer
        if flops_ratio == 1.0:
            assert ratio == pytest.approx(1.0, rel=1e-9)
        else:  # half the FLOPs, the same reads and writes
            assert flops_ratio <= ratio < 1.0


def test_an_operator_of_another_space_is_priced_by_the_substitution_profile():
    """A substitution priced on cuda.compiled given an operator made in a cpu.eager space of the same shapes: its
    cost ratio is in the substitution's units (its conv costs 1x), not the other profile's."""
    from syno_automl import known

    model, x = _conv_model()
    gpu = substitute(model, nn.Conv2d, x, cost_ratio=None, max_depth=8, target="cuda.compiled")
    model, x = _conv_model()
    cpu = substitute(model, nn.Conv2d, x, cost_ratio=None, max_depth=8, target="cpu.eager").space
    for op in (known.conv2d(cpu), known.grouped_conv2d(cpu, "s")):
        own = gpu.cost_ratio(Operator.from_json(gpu.space, op.to_json()))
        assert gpu.cost_ratio(op) == pytest.approx(own, rel=1e-9)
    assert gpu.cost_ratio(known.conv2d(cpu)) == pytest.approx(1.0, rel=1e-9)


def test_substitute_has_a_cost_budget_by_default():
    model, x = _conv_model()
    on = substitute(model, nn.Conv2d, x, max_depth=5, check=False)  # depth 5 at 1x cost: empty, refused by the check
    assert on.space.budgets["max_cost"] == pytest.approx(on.baseline_cost)
    model, x = _conv_model()
    off = substitute(model, nn.Conv2d, x, max_depth=5, cost_ratio=None)
    assert "max_cost" not in off.space.budgets


def test_a_budget_that_leaves_nothing_says_so():
    from syno_automl.errors import EmptySpaceError

    model, x = _conv_model()
    with pytest.raises(EmptySpaceError, match="cost_ratio"):  # at once, by substitute()'s check
        substitute(model, nn.Conv2d, x, max_depth=5, cost_ratio=1e-3)
    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, max_depth=5, cost_ratio=1e-3, check=False)
    with pytest.raises(EmptySpaceError, match="cost_ratio"):
        sub.space.sample(2, seed=0, max_attempts=50)


def test_calibrate_writes_a_loadable_profile(tmp_path):
    torch.set_num_threads(1)
    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, max_depth=5, check=False)  # calibrate() drops the cost budget
    out = tmp_path / "mine.json"
    profile = calibrate(sub, "cpu.eager", operators=4, seed=0, repeats=1, progress=False, out=out)
    loaded = load(out)
    assert loaded == profile and loaded.target == "cpu.eager" and loaded.torch == torch.__version__
    assert loaded.fit["programs"] == 4 and loaded.seconds_per_unit == 1e-9
    model, x = _conv_model()
    again = substitute(model, nn.Conv2d, x, max_depth=5, target=out, check=False)  # what --cost-profile FILE does
    assert again.space.cost_profile == loaded


def test_calibrate_picks_the_same_operators_for_a_seed(monkeypatch):
    import syno_automl.calibrate as cal

    picked: list[list[str]] = []
    def timed(op, mapping, *args):  # no clock: which operators are picked is the point
        picked[-1].append(op.hash)
        return 1e-3 * (1 + int(op.hash[:3], 16))

    monkeypatch.setattr(cal, "_time_program", timed)
    for _ in range(2):
        picked.append([])
        model, x = _conv_model()
        cal.calibrate(substitute(model, nn.Conv2d, x, max_depth=5, check=False), "cpu.eager", operators=5, seed=3,
                      progress=False)
    assert picked[0] == picked[1] and len(picked[0]) == 5


def test_calibrate_refuses_cuda_without_it_and_unknown_targets():
    model, x = _conv_model()
    sub = substitute(model, nn.Conv2d, x, max_depth=5, check=False)
    with pytest.raises(CostProfileError, match="unknown target"):
        calibrate(sub, "tpu.eager", operators=2, progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(CostProfileError, match="CUDA"):
            calibrate(sub, "cuda.eager", operators=2, progress=False)
