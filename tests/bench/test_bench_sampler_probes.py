"""bench/sampler_probes.py on the default search's space: the first rollouts of a few decisions recorded (the MCTS
left as it was), and sampled again alone: a probe found by the tree is found again with its own pair (16 × 64)."""
from __future__ import annotations

import sampler_probes  # bench/sampler_probes.py (bench/ is on pytest's pythonpath)

from syno_automl.search import mcts


def test_the_probes_of_a_fill_are_recorded_and_sampled_again_as_the_tree_did() -> None:
    sample = mcts.MCTS._sample
    space, probes = sampler_probes.recorded_probes(3, 1)
    assert mcts.MCTS._sample is sample
    assert probes and all(leaf.path for leaf, _ in probes)   # decisions 1 and 2 rolled out new leaves
    limits = mcts.MCTSLimits()
    again = [sampler_probes.found(space, leaf, seed, limits.probe_attempts, 64) for leaf, seed in probes]
    assert any(again)   # (a decision ends at a leaf whose probe found its operator)
