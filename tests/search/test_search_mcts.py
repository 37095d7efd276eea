"""MCTS statistics (no Optuna): determinism, no re-proposals, virtual loss, widening, exploitation, rewards."""
from __future__ import annotations

import math
import random

import pytest
from _syno_helpers import pseudo_accuracy, tiny_space

from syno_automl.search.mcts import MCTS, MCTSLimits, Observation, SearchExhaustedError, derive_seed
from syno_automl.search.reward import Reward


def _run(tree: MCTS, decisions: int, reward=pseudo_accuracy, taken: set[str] | None = None) -> list[str]:
    taken = set() if taken is None else taken
    out = []
    for d in range(decisions):
        p = tree.propose(d, taken=taken)
        out.append(p.operator.hash)
        taken.add(p.operator.hash)
        tree.add(Observation(tuple(p.operator.path), reward(p.operator.hash), p.leaf))
    return out


def test_same_seed_same_sequence_and_no_repeats():
    a = _run(MCTS(tiny_space(), seed=5), 25)
    b = _run(MCTS(tiny_space(), seed=5), 25)
    assert a == b
    assert len(set(a)) == 25
    assert _run(MCTS(tiny_space(), seed=6), 25) != a


def test_rebuilt_tree_proposes_like_the_long_lived_one():
    space = tiny_space()
    live = MCTS(space, seed=1)
    history: list[tuple[Observation, str]] = []
    taken: set[str] = set()
    for d in range(20):
        p = live.propose(d, taken=taken)
        # a tree rebuilt from the same observations, added in another order, agrees
        fresh = MCTS(tiny_space(), seed=1)
        for obs, _ in random.Random(d).sample(history, len(history)):
            fresh.add(obs)
        assert fresh.propose(d, taken=taken).operator.hash == p.operator.hash
        obs = Observation(tuple(p.operator.path), pseudo_accuracy(p.operator.hash), p.leaf)
        live.add(obs)
        history.append((obs, p.operator.hash))
        taken.add(p.operator.hash)


def test_exhausts_the_space_then_raises():
    space = tiny_space(depth=3)  # 7 operators
    count = space.enumerate().operator_count
    tree = MCTS(space, seed=0)
    seen = _run(tree, count)
    assert len(set(seen)) == count
    with pytest.raises(SearchExhaustedError):
        tree.propose(count, taken=set(seen))


def test_running_trials_are_virtual_loss():
    space = tiny_space()
    tree = MCTS(space, seed=3)
    first = tree.propose(0)
    running = [Observation(tuple(first.operator.path), None, first.leaf)]
    second = tree.propose(1, running=running, taken={first.operator.hash})
    assert second.operator.hash != first.operator.hash
    # virtual loss leaves no trace in the statistics
    assert tree.stats().visits == 0 and len(tree) == 0


def test_add_remove_exact_and_order_free():
    tree = MCTS(tiny_space(), seed=0)
    obs = [Observation(("a", "b", "c"), r, 2) for r in (0.1, 0.7, 1 / 3)]
    for o in obs:
        tree.add(o)
    assert tree.stats(("a",)).visits == 3 and tree.stats(("a", "b")).visits == 3
    assert tree.stats(("a", "b", "c")).visits == 0  # below the leaf: not in the tree
    assert math.isclose(tree.stats().mean, (0.1 + 0.7 + 1 / 3) / 3, rel_tol=1e-9)
    tree.remove(obs[1])
    assert tree.stats().visits == 2
    with pytest.raises(ValueError):
        tree.add(Observation(("a",), 1.5))
    with pytest.raises(ValueError):
        tree.add(Observation(("a",), None))
    fresh = MCTS(tiny_space(), seed=0)
    for o in (obs[2], obs[0]):
        fresh.add(o)
    assert fresh.stats() == tree.stats()  # fixed-point sums: exactly equal whatever the order


def test_progressive_widening_limits_root_children():
    tree = MCTS(tiny_space(depth=5), seed=2, widening=1.0, widening_power=0.5)
    _run(tree, 16)
    visited = {k for (parent, k) in tree._edges if parent == "" and tree._edges[(parent, k)] > 0}
    assert 1 <= len(visited) <= math.ceil(16 ** 0.5)


def test_exploits_a_rewarding_subtree():
    """Operators under one depth-2 node (8% of the space) score 1, others 0.1: MCTS returns there, random
    sampling does not."""
    space = tiny_space(depth=5)
    sizes: dict[tuple[str, ...], int] = {}
    for op in space.enumerate().operators:
        sizes[tuple(op.path[:2])] = sizes.get(tuple(op.path[:2]), 0) + 1
    good = min((k for k, n in sizes.items() if n >= 15), key=lambda k: sizes[k])
    mcts_hits = random_hits = 0
    for seed in range(4):
        tree = MCTS(space, seed=seed)
        taken: set[str] = set()
        for d in range(40):
            p = tree.propose(d, taken=taken)
            taken.add(p.operator.hash)
            hit = tuple(p.operator.path[:2]) == good
            mcts_hits += hit
            tree.add(Observation(tuple(p.operator.path), 1.0 if hit else 0.1, p.leaf))
        random_hits += sum(tuple(op.path[:2]) == good for op in space.sample(40, seed=seed))
    assert mcts_hits >= 20 and mcts_hits > 4 * random_hits, (mcts_hits, random_hits, sizes[good])


def test_derive_seed_stable():
    assert derive_seed(1, "a", 2) == derive_seed(1, "a", 2) != derive_seed(1, "a", 3)
    assert 0 <= derive_seed("x") < 2 ** 63


def test_reward():
    r = Reward(lower=0.4, upper=0.7, power=4)
    assert r(0.3) == 0.0 and r(0.8) == 1.0
    assert math.isclose(r(0.55), 0.5 ** 4)
    assert r(float("nan")) == r.failed == 0.0
    loss = Reward.for_loss(upper=6.9, power=1)
    assert math.isclose(loss(3.45), 0.5) and loss(10.0) == 0.0 and loss(-1) == 1.0
    with pytest.raises(ValueError):
        Reward(lower=1.0, upper=0.5)
    with pytest.raises(ValueError):
        Reward(kind="latency")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Reward(power=0)


def test_a_run_of_fallbacks_samples_the_space_once_per_group_of_decisions():
    """A tree that always falls back (no sample call allowed to its rollouts): four decisions in a row (a group)
    share one whole-space draw of 4 and take its operators one by one; a tree rebuilt from nothing proposes the
    same at each (a pure function of seed, decision and taken); past them, the next group's 4 draws; the space's
    end is still reported."""
    from syno_automl.search.mcts import MCTSLimits

    space = tiny_space(depth=3)  # 7 operators
    samples = []
    sample = space.sample

    def counted(count, *args, **kwargs):
        samples.append((count, kwargs.get("prefix")))
        return sample(count, *args, **kwargs)
    space.sample = counted   # type: ignore[method-assign]
    limits = MCTSLimits(max_sample_calls=0)
    tree = MCTS(space, seed=3, limits=limits)
    taken: set[str] = set()
    for d in range(4):
        p = tree.propose(d, taken=taken)
        assert p.fallback and p.operator.hash not in taken
        assert MCTS(tiny_space(depth=3), seed=3, limits=limits).propose(d, taken=taken).operator.hash == \
            p.operator.hash
        taken.add(p.operator.hash)
    assert samples == [(4, None)]   # one draw of 4 served the group's four decisions
    # a fifth decision of the group (its 4 taken) reads the next group's 4 draws, which that group then reuses
    fifth = tree.propose(3, taken=taken)
    assert samples == [(4, None), (4, None)]
    assert tree.propose(4, taken=taken).operator.hash == fifth.operator.hash and len(samples) == 2
    taken.add(fifth.operator.hash)
    while len(taken) < 7:
        taken.add(tree.propose(len(taken), taken=taken).operator.hash)
    with pytest.raises(SearchExhaustedError):
        tree.propose(7, taken=taken)


def test_a_prefetch_draws_a_falling_back_decisions_group_of_4_and_no_more():
    """A prefetch whose decision falls back draws that decision's group of 4 (the decision then finds them drawn
    and proposes what a tree without prefetch does), but not the 64 or 256 drawn when the groups' 4 are taken:
    those take seconds, and a prefetch's calls stay short."""
    import contextlib
    import threading

    from syno_automl.search.mcts import MCTSLimits

    limits = MCTSLimits(max_sample_calls=0)   # every decision falls back

    def counting_tree() -> tuple[MCTS, list[int]]:
        space, samples = tiny_space(depth=3), []   # 7 operators
        sample = space.sample

        def counted(count, *args, **kwargs):
            samples.append(count)
            return sample(count, *args, **kwargs)
        space.sample = counted   # type: ignore[method-assign]
        return MCTS(space, seed=3, limits=limits), samples

    tree, samples = counting_tree()
    tree.prefetch(0, (), (), threading.Event()).join(timeout=60)
    assert samples == [4]
    assert tree.propose(0).operator.hash == MCTS(tiny_space(depth=3), seed=3, limits=limits).propose(0).operator.hash
    assert samples == [4]   # the decision found the prefetch's draw
    # every operator of the 8 groups' draws of 4 taken: a decision draws 64 next, a prefetch does not
    plain, plain_samples = counting_tree()
    taken = {op.hash for group in range(8)
             for op in plain._sample(4, derive_seed(3, "fallback", group, 4), None, 1000)[0]}
    plain_samples.clear()
    with contextlib.suppress(SearchExhaustedError):
        plain.propose(0, taken=taken)
    assert 64 in plain_samples
    tree, samples = counting_tree()
    tree.prefetch(0, (), taken, threading.Event()).join(timeout=60)
    assert samples == [4] * 8


def test_fallbacks_to_the_end_of_a_space_draw_each_groups_operators_once():
    """Decisions that all fall back, until the space (220 operators) is taken: every draw is made once. Clearing
    the kept draws past 32 (as before) redrew 37 of 164."""
    from collections import Counter

    from syno_automl.search.mcts import MCTSLimits

    space = tiny_space(depth=5)
    draws: Counter = Counter()
    sample = space.sample

    def counted(count, *args, **kwargs):
        draws[(count, kwargs.get("seed"))] += 1
        return sample(count, *args, **kwargs)
    space.sample = counted   # type: ignore[method-assign]
    tree = MCTS(space, seed=3, limits=MCTSLimits(max_sample_calls=0))
    taken: set[str] = set()
    with pytest.raises(SearchExhaustedError):
        for decision in range(400):
            taken.add(tree.propose(decision, taken=taken).operator.hash)
    assert len(taken) == 220 and len(draws) > 100
    assert max(draws.values()) == 1


def test_a_leafs_first_rollout_is_a_probe_of_probe_attempts_and_the_later_ones_ask_more():
    """A leaf's first completion is looked for in `probe_attempts` descents (a leaf whose probe finds none is dead:
    most such leaves found none in 48 either, and they took half of a late decision's time); 4 and 16 completions,
    asked when those found are taken, get rollout_attempts per completion (up to 4 completions' worth). The limits
    are part of the rollouts' key: facts sampled under other limits are not learned."""
    space = tiny_space()
    asked: list[tuple[int, int]] = []
    sample = space.sample

    def recorded(count, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - space.sample's own
        if kwargs.get("prefix") is not None:
            asked.append((count, kwargs["max_attempts"]))
        return sample(count, *args, **kwargs)

    space.sample = recorded
    tree = MCTS(space, seed=3, limits=MCTSLimits(probe_attempts=5, rollout_attempts=7))
    _run(tree, 30)
    assert (1, 5) in asked and all(attempts == 5 for count, attempts in asked if count == 1)
    assert any(count > 1 for count, _ in asked)  # (the tiny space runs out of fresh completions)
    assert all(attempts == 7 * min(count, 4) for count, attempts in asked if count > 1)
    keys = {MCTS(space, seed=3, limits=MCTSLimits(probe_attempts=p)).facts_key for p in (5, 16)}
    assert len(keys) == 2
