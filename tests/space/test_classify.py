"""known.classify names known forms up to a channel permutation, and None for new operators."""
from __future__ import annotations

import pytest

from syno_automl import OperatorSpace, known

CONV = ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2", "s=2: 2"],
        [{"N": 1, "C_in": 8, "C_out": 8, "H": 8, "W": 8}])
CONV1D = ("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in: 2", "C_out: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
          [{"N": 1, "C_in": 8, "C_out": 8, "L": 12}])
LINEAR = ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["s=2: 2"], [{"N": 4, "C_in": 8, "C_out": 8}])
DEPTHWISE = ("[N, C, H, W]", "[N, C, H, W]", ["N: 0", "C: 3", "H: 2", "W: 2"], ["k=3: 2"],
             [{"N": 2, "C": 4, "H": 7, "W": 6}])
POOL = ("[N, C, H, W]", "[N, C, s^-1*H, s^-1*W]", ["N: 0", "C: 0", "H: 2", "W: 2"], ["s=2: 2"],
        [{"N": 2, "C": 4, "H": 8, "W": 8}])


def steps(*s: str):
    return lambda space: known.walk(space, list(s))


@pytest.mark.parametrize("spec, build, name", [
    (CONV, known.conv2d, "conv2d 3x3"),
    (CONV, lambda s: known.grouped_conv2d(s, "s"), "grouped conv2d 3x3, s groups"),
    (CONV, steps("REDUCE s^-1*C_in", "REDUCE k", "REDUCE k", "MERGE [s, s^-1*C_out] -> C_out",
                 "CONTRACTION share [s, s^-1*C_in, k, k] outer [s^-1*C_out]", "SPLIT C_in -> [s^-1*C_in, s]",
                 "UNFOLD H -> [H, k]", "UNFOLD W -> [W, k]"), "grouped conv2d 3x3, s groups, channels permuted"),
    (CONV, steps("REDUCE C_in", "CONTRACTION share [C_in] outer [C_out]"), "1x1 conv"),
    (CONV, steps("REDUCE C_in", "SHIFT C_out", "CONTRACTION share [C_in] outer [C_out]"),
     "1x1 conv, channels permuted"),
    (CONV1D, known.conv1d, "conv1d 3"),
    (CONV1D, lambda s: known.grouped_conv1d(s, "s"), "grouped conv1d 3, s groups"),
    (CONV1D, known.pointwise_conv1d, "pointwise conv1d"),
    (LINEAR, known.linear, "linear"),
    (LINEAR, lambda s: known.grouped_linear(s, "s"), "block-diagonal linear, s blocks"),
    (DEPTHWISE, known.depthwise_conv2d, "depthwise conv2d 3x3"),
    (POOL, known.avg_pool2d, "pooling"),
    # new: a per-row weight with a one-step shift (a ShiftNet-like operator of the shared data)
    (CONV, steps("REDUCE C_in", "SHIFT W", "CONTRACTION share [C_in, H] outer [C_out]"), None),
    (CONV, steps("REDUCE C_in", "REDUCE k", "CONTRACTION share [C_in, k] outer [C_out]", "UNFOLD H -> [H, k]"),
     "conv2d 3x1"),
])
def test_classify(spec, build, name) -> None:
    space = OperatorSpace(*spec, max_depth=8, min_weights=0 if spec is POOL else 1)
    assert known.classify(build(space)) == name


def test_most_random_operators_are_new() -> None:
    space = OperatorSpace(*CONV, max_depth=6)
    names = [known.classify(op) for op in space.sample(20, seed=5)]
    assert names.count(None) >= 15
