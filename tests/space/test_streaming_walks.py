"""Walks (enumerate, sample) free the coordinates of the subtrees they leave (issue 15, native/dim.hpp).

What must not change: the operators found (same hashes with and without earlier walks in the space), and
every Node or Operator handed to Python stays valid and usable after the walk that made it and after
further walks. What must: the coordinates alive after a walk are a small part of those it created.
"""
from __future__ import annotations

from syno_automl import Operator, OperatorSpace

SPEC = dict(input_shape="[N, C_in, H, W]", output_shape="[N, C_out, H, W]",
            primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], coefficients=["k=3: 2"],
            mappings=[{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=5)


def space() -> OperatorSpace:
    return OperatorSpace(**SPEC, threads=2)


def test_walks_find_the_same_operators_and_free_their_coordinates() -> None:
    s = space()
    first = s.enumerate(5, max_operators=10)
    after_first = s.stats()
    second = s.enumerate(5, max_operators=0)
    after_second = s.stats()
    fresh = space().enumerate(5, max_operators=100_000)
    assert first.hashes == second.hashes == {op.hash for op in fresh.operators}
    assert first.operator_count == fresh.operator_count > 100
    # dims_interned counts the coordinates alive now: most of what a walk creates is freed when it ends,
    # and a second walk over the same space leaves no more alive than the first.
    assert after_first["dims_reclaimed"] > 0
    assert 4 * after_first["dims_interned"] < after_first["dims_created"]
    assert after_second["dims_interned"] <= after_first["dims_interned"]
    assert after_second["dims_created"] > after_first["dims_created"]


def test_operators_stay_usable_after_further_walks() -> None:
    s = space()
    enumerated = s.enumerate(5, max_operators=15).operators
    sampled = s.sample(8, seed=1)
    texts = {op.hash: (str(op), op.to_json(), op.program(0)["flops"]) for op in enumerated + sampled}
    for seed in (2, 3):
        s.sample(8, seed=seed)
    s.enumerate(5, max_operators=0)
    assert s.stats()["dims_reclaimed"] > 0
    other = space()
    for op in enumerated + sampled:
        text, doc, flops = texts[op.hash]
        assert str(op) == text and op.to_json() == doc and op.program(0)["flops"] == flops
        assert Operator.from_json(other, doc).hash == op.hash   # replays elsewhere
        assert Operator.from_json(s, doc).hash == op.hash       # and in its own space, after the walks


def test_python_nodes_survive_walks_started_from_them() -> None:
    s = space()
    child = next(c for c in s.root().children() if not c.is_final)
    grandchildren = [c.key for c in child.children()]
    below = s.enumerate(5, start=child, max_operators=5)
    prefixed = s.sample(4, seed=0, prefix=child)
    s.enumerate(5, max_operators=0)
    assert [c.key for c in child.children()] == grandchildren   # the node still walks the same children
    assert below.operator_count > 0 and len(prefixed) == 4
    fresh = space()
    fresh_child = next(c for c in fresh.root().children() if c.key == child.key)
    assert fresh.enumerate(5, start=fresh_child, max_operators=0).hashes == below.hashes
    assert [op.hash for op in fresh.sample(4, seed=0, prefix=fresh_child)] == [op.hash for op in prefixed]
    for op in prefixed:
        assert op.path[0] == child.key and str(op)
