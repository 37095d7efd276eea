"""bench/sampler_decisions.py's recording on the default search's space: each decision's rollouts as the tree made
them, and the MCTS left as it was (no timing asserted)."""
from __future__ import annotations

import sampler_decisions  # bench/sampler_decisions.py (bench/ is on pytest's pythonpath)

from syno_automl.search import mcts


def test_each_decision_records_its_sample_calls_and_the_tree_is_restored() -> None:
    sample, propose = mcts.MCTS._sample, mcts.MCTS.propose
    records = sampler_decisions.recorded_decisions(3)
    assert (mcts.MCTS._sample, mcts.MCTS.propose) == (sample, propose)
    assert len(records) == 3 and all(r["cpu_ms"] > 0 for r in records)
    first = records[0]["calls"]
    assert first, records[0]   # a fresh tree rolls out its first leaf
    for count, depth, ms, found, exhausted in (c for r in records for c in r["calls"]):
        assert count in (1, 4, 16) or depth == -1   # a rollout's 1, 4, 16 completions, or a whole-space draw
        assert depth >= -1 and ms >= 0 and found >= 0 and isinstance(exhausted, bool)
    assert all(r["restarts"] >= 0 and r["fallback"] in (False, True) for r in records)
