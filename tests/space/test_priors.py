"""Space priors (syno_automl.priors, native/priors.hpp): each one's counter moves, it rejects only what violates it,
and it loses nothing that satisfies it (the enumeration with the prior on equals the enumeration without it,
filtered by the prior after the fact); the channel-split-order twin rule; substitute's default priors."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from syno_automl import OperatorSpace, known, substitute
from syno_automl.errors import OperatorFormatError, OptionError
from syno_automl.priors import DEFAULT_PRIORS, violations
from syno_automl.space import Operator


def linear_space(depth: int = 5, **options) -> OperatorSpace:
    return OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["s=2: 2"],
                         [{"N": 2, "C_in": 8, "C_out": 8}], max_depth=depth, **options)


def conv_space(**options) -> OperatorSpace:
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "s=2: 2"], [{"N": 1, "C_in": 8, "C_out": 8, "H": 8, "W": 8}], max_depth=8,
                         **options)


def hashes(space: OperatorSpace) -> set[str]:
    walk = space.enumerate(max_operators=0)
    assert walk.stop_reason == "exhausted"
    return walk.hashes


def rejected(space: OperatorSpace, rule: str) -> int:
    return {r["name"]: r for r in space.stats()["rules"]}[rule]["rejected"]


@pytest.mark.parametrize("options, rule", [
    ({"prior_weight_io": True}, "weight-shares-input-and-output"),
    ({"prior_outer_kinds": True}, "outer-kind"),
    ({"prior_max_outer": 4.0}, "outer-product-limit"),        # C_out = 8 outer is over it: only grouped forms
    ({"prior_lowrank_size": 4}, "low-rank-size"),              # s = 2 low-rank coordinates are rejected, s^2 kept
    ({"prior_max_pooling": 2.0}, "unweighted-pooling-limit"),
    ({"min_flops": 200.0}, "flops-floor"),
])
def test_a_prior_loses_nothing_that_satisfies_it(options: dict, rule: str) -> None:
    off = linear_space()
    everything = off.enumerate(max_operators=100_000)
    on = linear_space(**options)
    kept = hashes(on)
    assert rejected(on, rule) > 0
    # the prior as a filter after the fact, evaluated in the prior's space (replayed: same operator, same hash)
    satisfying = set()
    for op in everything.operators:
        replayed = Operator.from_json(on, op.to_json())
        broken = violations(replayed)
        assert set(broken) <= {rule}
        if not broken:
            satisfying.add(op.hash)
    assert kept == satisfying
    assert 0 < len(kept) < everything.operator_count


def test_every_prior_at_once_is_the_intersection() -> None:
    options = {"prior_weight_io": True, "prior_max_outer": 8.0, "prior_max_pooling": 2.0, "min_flops": 100.0}
    off, on = linear_space(), linear_space(**options)
    everything = off.enumerate(max_operators=100_000).operators
    expected = {op.hash for op in everything if not violations(Operator.from_json(on, op.to_json()))}
    assert hashes(on) == expected


def test_priors_leave_replay_alone() -> None:
    """A structural (replay) space ignores the priors: an operator that breaks them still loads."""
    off = linear_space()
    breaking = [op for op in off.sample(40, seed=0) if op.primitive_counts().get("CONTRACTION", 0) == 2]
    on = linear_space(prior_weight_io=True, prior_max_pooling=1.0)
    loaded = [Operator.from_json(on, op.to_json()) for op in breaking]
    assert [op.hash for op in loaded] == [op.hash for op in breaking]


def test_sampled_operators_satisfy_the_priors() -> None:
    space = conv_space(prior_weight_io=True, prior_max_outer=2048.0, prior_lowrank_size=8, prior_max_pooling=8.0,
                       channel_inputs=[1])
    ops = space.sample(12, seed=3)
    assert len(ops) == 12 and all(violations(op) == [] for op in ops)


# -- the channel-split-order twin rule ------------------------------------------------------------------------------

INTERLEAVED = ["REDUCE s^-1*C_in", "REDUCE k", "REDUCE k", "MERGE [s, s^-1*C_out] -> C_out",
               "CONTRACTION share [s, s^-1*C_in, k, k] outer [s^-1*C_out]", "SPLIT C_in -> [s^-1*C_in, s]",
               "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"]


def test_the_grouped_convs_interleaved_twin_is_not_produced() -> None:
    twin = known.walk(conv_space(), INTERLEAVED)
    assert twin.hash == "af58e7e4454535e6"  # the default space's first move below the opening (issue 25)
    space = conv_space(channel_inputs=[1])
    with pytest.raises(OperatorFormatError):
        known.walk(space, INTERLEAVED)
    assert known.grouped_conv2d(space, "s").hash == known.grouped_conv2d(conv_space(), "s").hash
    assert rejected(space, "channel-split-order") >= 1


def _swapped_channel_split(primitives: list[str]) -> tuple[str, ...]:
    out = []
    for p in primitives:
        if p.startswith("SPLIT C_in -> ["):
            a, b = p[len("SPLIT C_in -> ["):-1].split(", ")
            p = f"SPLIT C_in -> [{b}, {a}]"
        out.append(p)
    return tuple(sorted(out))


def test_the_twin_rule_removes_only_operators_whose_twin_stays() -> None:
    off = linear_space().enumerate(max_operators=100_000).operators
    on = linear_space(channel_inputs=[1])
    kept = hashes(on)
    removed = [op for op in off if op.hash not in kept]
    assert removed and rejected(on, "channel-split-order") >= len(removed)
    kept_forms = {tuple(sorted(op.primitives)) for op in off if op.hash in kept}
    for op in removed:
        assert any(p.startswith("SPLIT C_in -> [") for p in op.primitives)
        assert _swapped_channel_split(op.primitives) in kept_forms, op.primitives


# -- substitute ------------------------------------------------------------------------------------------------------

class TwoConvs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).relu())


def test_substitute_turns_the_default_priors_on_and_off() -> None:
    x = torch.randn(2, 3, 8, 8)
    on = substitute(TwoConvs(), nn.Conv2d, x, where="b", flops_ratio=0.5).space
    assert on.options["prior_weight_io"] and on.options["prior_max_pooling"] == 8.0
    assert on.options["channel_inputs"] == [1] and on.budgets["min_flops"] > 0
    off = substitute(TwoConvs(), nn.Conv2d, x, where="b", flops_ratio=0.5, priors=False).space
    assert not any(k.startswith("prior_") or k == "channel_inputs" for k in off.options)
    assert "min_flops" not in off.budgets
    only = substitute(TwoConvs(), nn.Conv2d, x, where="b", flops_ratio=0.5, priors=["pooling"]).space
    assert set(only.options) == {"prior_max_pooling"}
    assert "outer_kinds" not in DEFAULT_PRIORS
    with pytest.raises(OptionError):
        substitute(TwoConvs(), nn.Conv2d, x, where="b", priors=["no-such-prior"])
    # the replaced layer's grouped form stays in: the opening of the default search
    assert known.grouped_conv2d(on, "s").hash
