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
