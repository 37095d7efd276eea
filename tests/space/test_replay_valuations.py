"""Canonical status depends on structure, not on size values (issue 10, item 5).

An operator found at one valuation replays at every valuation where its sizes are positive integers (and its
UNFOLD windows odd): to_module, program and flops work there. Elsewhere the error says which size fails.
"""
from __future__ import annotations

import pytest
import torch

from syno_automl import OperatorSpace, known
from syno_automl.errors import OperatorFormatError, ValuationError

CONV = ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], ["k=3: 2", "s=2: 2"])
README_MAPPING = {"N": 32, "C_in": 64, "C_out": 64, "H": 32, "W": 32}   # the README's conv space


def readme_space(**kw) -> OperatorSpace:
    return OperatorSpace(*CONV, [README_MAPPING], max_depth=8, **kw)


# Forward order of the issue's kind of operator: a 9-wide window on W, refused at W = 8 before the fix
# (min_unfold_ratio was decided at the new valuation) though every size is a positive integer there.
WIDE_WINDOW = ["REDUCE C_in", "SHIFT H", "STRIDE k*W by k", "CONTRACTION share [C_out, C_in] outer []",
               "CONTRACTION share [k*W] outer [C_out]", "STRIDE k^2*W by k", "MERGE [k^2, W] -> k^2*W",
               "UNFOLD W -> [W, k^2]"]
# Window k^2 = 9 against a main extent H / s = 6 at H = 12 (the issue's valuation).
STRIDED_WIDE_WINDOW = ["REDUCE k*C_in", "MERGE [s^-1*H, s] -> H", "CONTRACTION share [s, W] outer []",
                       "CONTRACTION share [k*C_in] outer [s, C_out]", "STRIDE k^2*C_in by k",
                       "MERGE [k^2, C_in] -> k^2*C_in", "UNFOLD s^-1*H -> [s^-1*H, k^2]", "STRIDE H by s"]


def _run(op, mapping: dict[str, int]) -> torch.Tensor:
    module = op.to_module(mapping)
    x = torch.randn(mapping.get("N", 2), mapping["C_in"], mapping["H"], mapping["W"])
    y = module(x)
    assert y.shape == (x.shape[0], mapping["C_out"], mapping["H"], mapping["W"])
    assert torch.isfinite(y).all()
    return y


@pytest.mark.parametrize("steps, mapping", [
    (WIDE_WINDOW, {"N": 2, "C_in": 8, "C_out": 8, "H": 8, "W": 8}),
    (STRIDED_WIDE_WINDOW, {"N": 2, "C_in": 8, "C_out": 8, "H": 12, "W": 12}),
])
def test_operator_from_h32_replays_where_its_window_is_wider_than_the_extent(steps, mapping) -> None:
    op = known.walk(readme_space(), steps)
    _run(op, mapping)
    program = op.program(mapping)
    assert program["input"]["shape"] == [2, 8, mapping["H"], mapping["W"]]
    assert op.flops(mapping) > 0


def test_issue_valuation_replays_every_sampled_operator() -> None:
    """The issue's call, op.to_module({N: 2, C_in: 8, C_out: 8, H: 12, W: 12}), on operators sampled at H=W=32."""
    mapping = {"N": 2, "C_in": 8, "C_out": 8, "H": 12, "W": 12}
    ops = readme_space().sample(40, seed=0)
    assert len(ops) == 40
    for op in ops:   # every size of these 40 is a positive integer at this valuation
        _run(op, mapping)


# Specs with coefficient k=3 and s=2, each with valuations where every monomial the space can build is a
# positive integer (primaries multiples of s^2 * k^2 = 36 where k or s may divide them).
SPECS = [
    ("conv2d", readme_space, [{"N": 1, "C_in": 36, "C_out": 36, "H": 36, "W": 36},
                              {"N": 2, "C_in": 36, "C_out": 72, "H": 36, "W": 72}]),
    ("conv1d", lambda: OperatorSpace("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in: 2", "C_out: 2", "L: 2"],
                                     ["k=3: 2", "s=2: 2"], [{"N": 8, "C_in": 32, "C_out": 32, "L": 64}],
                                     max_depth=7),
     [{"N": 2, "C_in": 36, "C_out": 72, "L": 36}, {"N": 1, "C_in": 72, "C_out": 36, "L": 108}]),
    ("linear", lambda: OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["g=4: 2"],
                                     [{"N": 8, "C_in": 64, "C_out": 32}], max_depth=6),
     [{"N": 3, "C_in": 16, "C_out": 16}, {"N": 2, "C_in": 48, "C_out": 80}]),
]


@pytest.mark.parametrize("name, make, valuations", SPECS, ids=[s[0] for s in SPECS])
def test_sampled_operators_replay_at_every_valid_valuation(name, make, valuations) -> None:
    space = make()
    ops = space.sample(15, seed=3)
    assert len(ops) == 15
    ran = 0
    for op in ops:
        for mapping in valuations:
            program = op.program(mapping)
            assert op.flops(mapping) == int(program["flops"]) > 0
            module = op.to_module(mapping)
            if program["peak_elements"] <= 4_000_000:   # some materialize outer products of 10^9 elements
                x = torch.randn(*program["input"]["shape"])
                y = module(x)
                assert list(y.shape) == program["output"]["shape"] and torch.isfinite(y).all(), (name, op.hash)
                ran += 1
            again = type(op).from_json(space.with_mappings([mapping]), op.to_json())
            assert again.hash == op.hash
    assert ran >= len(ops) // 2


def test_smaller_valuations_either_replay_or_name_the_size_that_fails() -> None:
    """At sizes that do not divide every monomial, an operator replays or raises ValuationError naming a size:
    never 'not a canonical child' (canonicity is the same at every valuation)."""
    ops = readme_space().sample(40, seed=5)
    failures = 0
    for op in ops:
        for mapping in ({"N": 2, "C_in": 4, "C_out": 6, "H": 6, "W": 6},
                        {"N": 1, "C_in": 2, "C_out": 2, "H": 4, "W": 4}):
            try:
                op.program(mapping)
            except ValuationError as e:
                failures += 1
                assert "is not a positive integer at" in str(e) and "step" in str(e)
    assert failures < 2 * len(ops)


def test_invalid_valuation_gets_a_clear_error() -> None:
    op = known.walk(readme_space(), STRIDED_WIDE_WINDOW)
    with pytest.raises(ValuationError, match=r"s\^-1\*H is not a positive integer at H=7, s=2"):
        op.to_module({"N": 2, "C_in": 8, "C_out": 8, "H": 7, "W": 12})
    conv = known.conv2d(readme_space())
    with pytest.raises(ValuationError, match="window k = 4 is even"):
        conv.program({"k": 4})
    assert conv.program({"k": 5})["weights"][0]["shape"] == [64, 64, 5, 5]
    with pytest.raises(ValueError, match="sizes must be positive"):
        conv.program({"H": 0})
    with pytest.raises(ValueError, match="not a variable"):
        conv.program({"Q": 3})


def test_structure_not_values_decides_children() -> None:
    """The children of a node (by key) are the same in replay spaces at different valuations."""
    a = readme_space()._structural()
    b = readme_space().with_mappings([{"N": 2, "C_in": 8, "C_out": 8, "H": 12, "W": 12}])._structural()
    node_a, node_b = a.root(), b.root()
    for _ in range(3):
        keys_a = sorted(c.key for c in node_a.children())
        assert keys_a == sorted(c.key for c in node_b.children())
        pick = keys_a[len(keys_a) // 2]
        node_a = next(c for c in node_a.children() if c.key == pick)
        node_b = next(c for c in node_b.children() if c.key == pick)


def test_search_space_children_are_structural_children() -> None:
    """Every child the search proposes (with its size filters) replays: from_json in the same space."""
    space = readme_space(max_flops=2 * 32 * 64 * 64 * 32 * 32 * 9 * 0.5)
    for op in space.sample(20, seed=11):
        again = type(op).from_json(space, op.to_json())
        assert again.hash == op.hash and again.program() == op.program()
    with pytest.raises(OperatorFormatError, match="not a canonical child"):
        space.replay(["0" * 16])
