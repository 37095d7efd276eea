"""What a SynoSampler's decisions learned about the space, kept on the trials so that every sampler of the same space
and seed reads it back (a new worker, a resumed search, the other workers of a study): two system attrs.

* ``syno:rollouts`` ``{"key": MCTS.facts_key, "facts": [RolloutFact.to_data(), ...]}``: the rollouts the decision
  sampled, then (added when the trial ends) those its prefetch sampled meanwhile. They spare work only: a sampler
  that reads none proposes the same operators, having sampled them again.
* ``syno:dead`` ``{"key": MCTS.dead_key, "nodes": [node key, ...]}``: the nodes the decision found dead
  (mcts.Proposal.dead), written with its operator. They are part of the study's state, as its observations are:
  every later decision walks around them (MCTS.propose's `dead`), so no decision rolls them out again, and a sampler
  reading the trials knows them as the one that made the trials did. A pure function of the decision's inputs
  (seed, trial number, the trials before it), never of timing or of a prefetch.

Each record is read once per trial and then only for what it gained (a record grows: the rollouts when the trial
ends, the dead nodes when a conflicting pick is redone).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from optuna.trial import FrozenTrial

from syno_automl.search.mcts import MCTS, RolloutFact

__all__ = ["SYS_DEAD", "SYS_ROLLOUTS", "TrialRecords"]

SYS_ROLLOUTS = "syno:rollouts"
SYS_DEAD = "syno:dead"


def _held(trial: FrozenTrial, attr: str, key: str, field: str) -> list:
    """The list `field` of the trial's record `attr` when it was written for `key` (else another space, seed or
    version: [])."""
    held = trial.system_attrs.get(attr)
    if isinstance(held, dict) and held.get("key") == key and isinstance(held.get(field), list):
        return held[field]
    return []


class TrialRecords:
    """The records of a study's trials as one tree reads and writes them: the dead nodes read so far (`dead`), and
    how much of each trial's records was read."""

    def __init__(self, tree: MCTS) -> None:
        self._tree = tree
        self.dead: set[str] = set()
        self.facts_read: dict[int, int] = {}  # trial number -> how many of its recorded rollouts were learned
        self._dead_read: dict[int, int] = {}  # trial number -> how many of its dead nodes were read

    def read(self, trial: FrozenTrial) -> None:
        """Learns what `trial`'s records gained since the last read: rollouts into the tree, dead nodes into
        `dead`."""
        number = trial.number
        facts = _held(trial, SYS_ROLLOUTS, self._tree.facts_key, "facts")
        read = self.facts_read.get(number, 0)
        if len(facts) > read:
            self.facts_read[number] = len(facts)
            learned = (RolloutFact.from_data(d) for d in facts[read:])
            self._tree.learn(f for f in learned if f is not None)
        nodes = _held(trial, SYS_DEAD, self._tree.dead_key, "nodes")
        read = self._dead_read.get(number, 0)
        if len(nodes) > read:
            self._dead_read[number] = len(nodes)
            self.dead.update(k for k in nodes[read:] if isinstance(k, str))

    def rollouts_attr(self, trial: FrozenTrial, facts: list[RolloutFact]) -> dict[str, Any]:
        """The system attr keeping on `trial` the rollouts the tree (and its prefetch) sampled since the last record:
        `facts`, extended with them, after those the trial holds already (a decision's, when its trial ends: the
        prefetch's meanwhile); {} when there are none."""
        facts.extend(self._tree.take_new_facts())
        if not facts:
            return {}
        key = self._tree.facts_key
        data = list(_held(trial, SYS_ROLLOUTS, key, "facts")) + [f.to_data() for f in facts]
        self.facts_read[trial.number] = len(data)
        return {SYS_ROLLOUTS: {"key": key, "facts": data}}

    def dead_attr(self, nodes: Iterable[str]) -> dict[str, Any]:
        """The system attr recording the nodes a decision found dead, in the order it found them; {} for none. (Not
        marked read: the next read adds them to `dead`, as any other sampler's does.)"""
        nodes = list(nodes)
        return {SYS_DEAD: {"key": self._tree.dead_key, "nodes": nodes}} if nodes else {}
