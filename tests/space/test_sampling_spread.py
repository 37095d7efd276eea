"""FLOPs-stratified sampling (space.sample(flops_bins=...), native/sample.cpp): draws spread over the FLOPs range
the budget allows, deterministically per seed whatever the thread count; the FLOPs bounds it relies on hold."""
from __future__ import annotations

import math

from syno_automl import OperatorSpace

CONV_FLOPS = 2 * 8 * 8 * 8 * 8 * 9  # the 3x3 conv this space replaces


def space() -> OperatorSpace:
    return OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                         ["k=3: 2", "s=2: 2"], [{"N": 1, "C_in": 8, "C_out": 8, "H": 8, "W": 8}], max_depth=6,
                         max_flops=CONV_FLOPS)


def bins_of(ops, bins: int = 4) -> list[int]:
    """Draws per bin as the sampler stratifies: log-uniform over [max_flops / 100, max_flops]."""
    counts = [0] * bins
    for op in ops:
        x = math.log(op.total_flops() / (CONV_FLOPS / 100)) / math.log(100) * bins
        counts[min(bins - 1, max(0, math.floor(x)))] += 1
    return counts


def test_stratified_draws_reach_the_cheap_and_the_dear_bins() -> None:
    sp = space()
    uniform = bins_of(sp.sample(40, seed=0, flops_bins=0))
    spread = bins_of(sp.sample(40, seed=0, flops_bins=4))
    assert sum(spread) == sum(uniform) == 40
    assert min(spread) >= 4 and min(spread) > min(uniform)  # uniform: 1 draw in the cheapest bin


def test_stratified_sampling_is_deterministic_whatever_the_threads() -> None:
    one = [op.hash for op in space().sample(8, seed=7, flops_bins=4, threads=1)]
    two = [op.hash for op in space().sample(8, seed=7, flops_bins=4, threads=2)]
    assert one == two and len(set(one)) == 8


def test_every_prefix_bounds_the_operators_flops() -> None:
    sp = space()
    for op in sp.sample(10, seed=1):
        node, flops = sp.root(), op.total_flops()
        for key in op.path[:-1]:
            node = node.apply(key)
            assert node.flops_upper >= flops >= node._native.flops_bound


def _tree_draws(flops_bins: int, decisions: int = 24) -> list:
    from syno_automl.search.mcts import MCTS, Observation

    tree, taken, ops = MCTS(space(), seed=3, flops_bins=flops_bins), set(), []
    for decision in range(decisions):
        proposal = tree.propose(decision, taken=taken)
        ops.append(proposal.operator)
        taken.add(proposal.operator.hash)
        tree.add(Observation(tuple(proposal.operator.path), 0.5, proposal.leaf))  # one reward: the tree widens
    return ops


def test_the_trees_rollouts_spread_over_the_budget_with_flops_bins() -> None:
    """--flops-bins reaches the MCTS's rollouts: their draws are spread more evenly over the FLOPs bands (here the
    uniform tree piles up in the dearest band; the tree's walk still picks the subtrees, so a band its subtrees
    lack stays thin); the proposals stay a pure function of the seed."""
    def entropy(counts: list[int]) -> float:
        return -sum(c / sum(counts) * math.log(c / sum(counts)) for c in counts if c)

    spread_ops = _tree_draws(4)
    uniform, spread = bins_of(_tree_draws(0)), bins_of(spread_ops)
    assert sum(uniform) == sum(spread) == 24
    assert max(spread) < max(uniform) and entropy(spread) > entropy(uniform), (uniform, spread)
    assert [op.hash for op in _tree_draws(4, 6)] == [op.hash for op in spread_ops[:6]]


def test_flops_bins_is_checked() -> None:
    import pytest

    from syno_automl.errors import OptionError
    from syno_automl.search.mcts import MCTS

    with pytest.raises(OptionError, match="flops_bins"):
        MCTS(space(), flops_bins=-1)
