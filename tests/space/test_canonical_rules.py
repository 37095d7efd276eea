"""Each canonicalization rule: the redundant construction is rejected, its canonical twin is accepted.

Spaces here switch distance pruning off, so that only the rules decide what is a child.
"""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from syno_automl import OperatorSpace
from syno_automl.known import _normalize

PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]
MAPPING = {"N": 2, "C_in": 4, "C_out": 4, "H": 16, "W": 16}


def space(out: str = "[N, C_out, H, W]", inp: str = "[N, C_in, H, W]", heuristics: bool = True, **kw) -> OperatorSpace:
    kw.setdefault("max_depth", 10)
    return OperatorSpace(inp, out, PRIMARY, ["k=3: 2", "s=2: 2", "t=5: 2"], [MAPPING], distance_pruning=False,
                         canonical_rules=heuristics, **kw)


def children_after(sp: OperatorSpace, prefix: Sequence[str]) -> set[str]:
    node = sp.root()
    for step in prefix:
        match = [c for c in node.children() if _normalize(c.description) == _normalize(step)]
        assert match, f"prefix step {step!r} is not a child; have {sorted(c.description for c in node.children())[:30]}"
        node = match[0]
    return {_normalize(c.description) for c in node.children()}


# (rule, space kwargs, prefix of the redundant form, its redundant last step, prefix of the twin, twin's last step)
RULES = [
    ("reduce-order", {}, ["REDUCE k"], "REDUCE C_in", ["REDUCE C_in"], "REDUCE k"),
    ("split-chains-right", {}, ["REDUCE C_in", "SPLIT H*W -> [H, W]"], "SPLIT C_out*H*W -> [H*W, C_out]",
     ["REDUCE C_in", "SPLIT C_out*W -> [W, C_out]"], "SPLIT C_out*H*W -> [H, C_out*W]"),
    ("split-undoes-merge", {}, ["REDUCE C_in", "MERGE [s^-1*H, s] -> H"], "SPLIT H -> [s^-1*H, s]",
     ["REDUCE C_in", "MERGE [s^-1*H, s] -> H"], "SPLIT H -> [s, s^-1*H]"),
    ("split-of-reductions", {}, ["REDUCE C_in", "REDUCE k"], "SPLIT k*C_in -> [C_in, k]", [], "REDUCE k*C_in"),
    ("merge-above-split", {}, ["REDUCE C_in", "SPLIT H*W -> [H, W]"], "MERGE [s^-1*H*W, s] -> H*W",
     ["REDUCE C_in"], "MERGE [s^-1*H, s] -> H"),
    ("merge-chains-right", {}, ["REDUCE C_in", "MERGE [s^-1*H, s] -> H"], "MERGE [s^-2*H, s] -> s^-1*H",
     ["REDUCE C_in"], "MERGE [s^-1*H, s] -> H"),
    ("merge-of-reduction", {}, ["REDUCE C_in"], "MERGE [s^-1*C_in, s] -> C_in", ["REDUCE C_in"],
     "MERGE [s^-1*C_out, s] -> C_out"),
    ("merge-large-block-above-unfold", {}, ["REDUCE C_in", "REDUCE k", "CONTRACTION share [C_in, k] outer [C_out]",
                                            "UNFOLD H -> [H, k]"], "MERGE [s, s^-1*H] -> H",
     ["REDUCE C_in", "REDUCE k"], "MERGE [s, s^-1*H] -> H"),
    ("shift-of-reduction", {}, ["REDUCE C_in"], "SHIFT C_in", ["REDUCE C_in"], "SHIFT H"),
    ("shift-chain", {}, ["REDUCE C_in", "SHIFT H"], "SHIFT H", ["REDUCE C_in", "SHIFT H"], "SHIFT W"),
    ("shift-on-unordered", {"out": "[N, C_out: unordered, H, W]"}, ["REDUCE C_in"], "SHIFT C_out",
     ["REDUCE C_in"], "SHIFT H"),
    ("stride-chain", {}, ["REDUCE C_in", "STRIDE s*H by s"], "STRIDE s^2*H by s", ["REDUCE C_in"], "STRIDE s*H by s"),
    ("unfold-reduces-at-most-one", {"heuristics": False}, ["REDUCE C_in", "REDUCE k"], "UNFOLD C_in -> [C_in, k]",
     ["REDUCE C_in", "REDUCE k"], "UNFOLD H -> [H, k]"),
    ("unfold-window-not-bare-reduction", {}, ["REDUCE C_in", "REDUCE k"], "UNFOLD H -> [H, k]",
     ["REDUCE C_in", "REDUCE k", "CONTRACTION share [C_in, k] outer [C_out]"], "UNFOLD H -> [H, k]"),
    ("unfold-order", {"heuristics": False}, ["REDUCE k", "REDUCE t", "UNFOLD H -> [H, k]"], "UNFOLD H -> [H, t]",
     ["REDUCE k", "REDUCE t", "UNFOLD H -> [H, t]"], "UNFOLD H -> [H, k]"),
    ("no-expand-reduce", {}, ["REDUCE C_in"], "CONTRACTION share [H] outer [C_in]",
     ["REDUCE C_in"], "CONTRACTION share [C_in] outer [H]"),
    ("contraction-needs-two-shares", {}, ["REDUCE C_in"], "CONTRACTION share [H] outer []",
     ["REDUCE C_in"], "CONTRACTION share [H, W] outer []"),
    ("views-commute-with-contraction", {}, ["REDUCE C_in", "CONTRACTION share [C_out, H] outer []"], "SHIFT W",
     ["REDUCE C_in", "SHIFT W"], "CONTRACTION share [C_out, H] outer []"),
    ("share-lhs-viewed-below", {}, ["REDUCE C_in", "CONTRACTION share [C_out, H] outer []"], "SHIFT H",
     ["REDUCE C_in", "SHIFT H"], "CONTRACTION share [C_out, H] outer []"),
]


@pytest.mark.parametrize("rule, kwargs, prefix, redundant, twin_prefix, twin", RULES, ids=[r[0] for r in RULES])
def test_rule_rejects_redundant_and_keeps_twin(rule, kwargs, prefix, redundant, twin_prefix, twin) -> None:
    sp = space(**kwargs)
    assert _normalize(redundant) not in children_after(sp, prefix)
    assert _normalize(twin) in children_after(sp, twin_prefix)
    counters = {r["name"]: r for r in sp.stats()["rules"]}
    assert counters[rule]["rejected"] >= 1


def test_independent_contractions_are_generated_in_one_order_only() -> None:
    sp = space(heuristics=False)
    a, b = "CONTRACTION share [H] outer []", "CONTRACTION share [W] outer []"
    orders = [_normalize(b) in children_after(sp, ["REDUCE C_in", a]),
              _normalize(a) in children_after(sp, ["REDUCE C_in", b])]
    assert orders.count(True) == 1
    assert {r["name"]: r for r in sp.stats()["rules"]}["independent-contractions-ordered"]["rejected"] >= 1


def test_equal_reductions_are_interchangeable() -> None:
    sp = space(heuristics=False)
    node = sp.root()
    for step in ["REDUCE k", "REDUCE k"]:
        node = [c for c in node.children() if c.description == step][0]
    unfolds = [c for c in node.children() if c.description == "UNFOLD H -> [H, k]"]
    assert len(unfolds) == 1
    assert {r["name"]: r for r in sp.stats()["rules"]}["equal-reductions-interchangeable"]["rejected"] >= 1


def test_bare_expand_only_feeds_a_repeat() -> None:
    sp = space(max_counts={"EXPAND": 1})
    assert "EXPAND H" not in children_after(sp, ["REDUCE C_in"])
    assert "EXPAND s" in children_after(sp, ["REDUCE C_in", "MERGE [s^-1*H, s] -> H"])


def test_unordered_input_is_never_shifted() -> None:
    def finals(inp: str) -> int:
        sp = OperatorSpace(inp, "[N, C, H]", ["N: 0", "C: 2", "H: 2"], [], [{"N": 2, "C": 4, "H": 8}],
                           max_depth=4, min_weights=0, distance_pruning=False)
        node = [c for c in sp.root().children() if c.description == "SHIFT C"][0]
        return sum(c.is_final for c in node.children())
    assert finals("[N, C: unordered, H]") == 0
    assert finals("[N, C, H]") == 1


def test_weights_are_never_viewed() -> None:
    sp = space()
    prefix = ["REDUCE C_in", "CONTRACTION share [C_in] outer [C_out]"]
    kids = children_after(sp, prefix)
    # C_out now exists only in the weight: no view of it, but views of the data coordinates remain.
    assert not any("C_out" in k and not k.startswith(("CONTRACTION", "REDUCE")) for k in kids)
    assert {r["name"]: r for r in sp.stats()["rules"]}["weights-never-viewed"]["rejected"] >= 1
