"""sample() spares work, never results (native/sample.cpp; issue 34, item 12: an MCTS rollout is one such call).

Counted in children generations (the space's `stats()["depths"][d]["expanded"]`), not in seconds: within one call a
node's children are generated once, however many descents pass through it, and with one thread the descents after
the one that meets the count are not run. The draws are those of a fresh space, whatever the thread count.
"""
from __future__ import annotations

import pytest

from syno_automl import OperatorSpace

SPEC = dict(input_shape="[N, C_in, H, W]", output_shape="[N, C_out, H, W]",
            primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], coefficients=["k=3: 2"],
            mappings=[{"N": 2, "C_in": 4, "C_out": 4, "H": 8, "W": 8}], max_depth=6)
BUDGET = 64  # space.sample's default: expansions one descent may make


def prefix_of(space: OperatorSpace):
    """A node at depth 3 (below the depths whose children the space keeps) with operators under it."""
    op = next(o for o in space.sample(20, seed=0) if len(o.path) >= 5)
    node = space.root()
    for key in op.path[:3]:
        node = node.apply(key)
    return node


def generations(space: OperatorSpace) -> dict[int, int]:
    return {d["depth"]: d["expanded"] for d in space.stats()["depths"]}


def drawn(space: OperatorSpace, **kwargs) -> tuple[list[str], dict[int, int]]:
    """The hashes one sample call draws below `prefix_of(space)`, and the children generations it made per depth."""
    prefix = prefix_of(space)
    before = generations(space)
    ops = space.sample(prefix=prefix, **kwargs)
    after = generations(space)
    return [op.hash for op in ops], {d: n - before.get(d, 0) for d, n in after.items() if n > before.get(d, 0)}


@pytest.mark.parametrize("count, threads", [(1, 1), (4, 2), (16, 2)])
def test_a_call_generates_the_prefix_children_once(count: int, threads: int) -> None:
    space = OperatorSpace(**SPEC, threads=threads)
    hashes, made = drawn(space, count=count, seed=3, max_attempts=48 * min(count, 4))
    # the prefix: once, not once per descent (16 a batch); with threads, descents that reach it at the same moment
    # may each generate it (the memo is checked, then filled: the same children), at most once a thread
    assert hashes and 1 <= made[3] <= threads


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_descents_past_the_count_do_not_run(seed: int) -> None:
    space = OperatorSpace(**SPEC, threads=1)
    hashes, made = drawn(space, count=1, seed=seed, max_attempts=48)
    assert len(hashes) == 1 and space.last_report.attempts == 1  # the first descent found it
    assert sum(made.values()) <= BUDGET  # that descent's expansions only (the batch's 16 made 87 to 166)


@pytest.mark.parametrize("count", [1, 4, 16])
def test_the_draws_are_a_fresh_space_s_whatever_the_threads(count: int) -> None:
    used = OperatorSpace(**SPEC, threads=2)
    for seed in range(3):  # calls before: nothing of theirs is reused
        used.sample(count, seed=seed, prefix=prefix_of(used), max_attempts=48)
    kwargs = dict(count=count, seed=7, max_attempts=48 * min(count, 4))
    fresh = OperatorSpace(**SPEC, threads=1)
    assert drawn(used, **kwargs)[0] == drawn(fresh, **kwargs)[0]
    assert used.last_report.attempts == fresh.last_report.attempts
