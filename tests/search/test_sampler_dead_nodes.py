"""The nodes a decision finds dead (issue 46, item 4): recorded on its trial (``syno:dead``), walked around by every
later decision of any sampler of the space and seed, so that none rolls them out again, and the proposals the same
for the sampler that made the trials, a new one, and one with or without a prefetch."""
from __future__ import annotations

import optuna
import pytest
from _syno_helpers import objective, tiny_space

from syno_automl.search.learned import SYS_DEAD, SYS_ROLLOUTS
from syno_automl.search.mcts import MCTS, MCTSLimits, Observation
from syno_automl.search.sampler import SynoSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

SEED = 3
TRIALS = 30   # the tiny space (52 operators at depth 4) has dead nodes after a few decisions


def _sampler(prefetch: bool = False) -> SynoSampler:
    return SynoSampler(tiny_space(depth=4), seed=SEED, prefetch=prefetch)


def _made(n: int = TRIALS, prefetch: bool = False) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=_sampler(prefetch))
    study.optimize(objective, n_trials=n)
    return study


def _hashes(study: optuna.Study) -> list[str]:
    return [t.user_attrs["syno.hash"] for t in study.trials]


def _dead_records(study: optuna.Study) -> list[list[str]]:
    return [t.system_attrs.get(SYS_DEAD, {}).get("nodes", []) for t in study.trials]


def _copy(study: optuna.Study, first: int, *, rollouts: bool = True) -> optuna.Study:
    """A new in-memory study with the first `first` trials of `study` (without their recorded rollouts: then a
    walk into a node sampled before has to sample it again)."""
    copy = optuna.create_study(direction="maximize")
    for t in study.get_trials(deepcopy=True)[:first]:
        if not rollouts:
            t.system_attrs.pop(SYS_ROLLOUTS, None)
        copy.add_trial(t)
    return copy


def test_the_nodes_a_decision_found_dead_are_on_its_trial():
    study = _made()
    sampler = study.sampler
    records = [t.system_attrs[SYS_DEAD] for t in study.trials if SYS_DEAD in t.system_attrs]
    assert records and all(r["key"] == sampler._tree.dead_key for r in records)
    nodes = [k for r in records for k in r["nodes"]]
    assert len(nodes) == len(set(nodes))  # a node found dead once is never walked into again
    # a decision's record is what the tree proposes on the trials before it
    number = TRIALS // 2
    fresh = _sampler()
    copy = _copy(study, number)
    running, taken = fresh._sync(copy)
    proposal = fresh._tree.propose(number, running, taken, fresh._records.dead)
    assert proposal.operator.hash == study.trials[number].user_attrs["syno.hash"]
    assert list(proposal.dead) == _dead_records(study)[number]


def test_a_new_sampler_does_not_roll_out_the_nodes_recorded_dead():
    study = _made()
    # without the recorded rollouts: a walk into any node, dead or not, would call space.sample for it again
    copy = _copy(study, len(study.trials), rollouts=False)
    recorded = {k for nodes in _dead_records(study) for k in nodes}
    sampler = _sampler()
    prefixes: list[str] = []
    original = sampler.space.sample
    sampler.space.sample = lambda *a, **k: prefixes.append(k["prefix"].key) or original(*a, **k)
    copy.sampler = sampler
    copy.optimize(objective, n_trials=5)
    assert prefixes  # it did sample (the rollouts were not recorded)
    assert not recorded & set(prefixes)


@pytest.mark.parametrize("prefetch", [False, True])
def test_a_new_sampler_proposes_what_the_one_that_made_the_trials_did(prefetch):
    made = _made()
    resumed = _made(TRIALS // 2)
    resumed.sampler = _sampler(prefetch)   # a new worker, a --resume
    resumed.optimize(objective, n_trials=TRIALS - TRIALS // 2)
    assert _hashes(resumed) == _hashes(made)
    assert _dead_records(resumed) == _dead_records(made)
    assert any(_dead_records(made)[TRIALS // 2:])  # the new sampler read dead nodes and found new ones


def test_the_dead_nodes_recorded_do_not_depend_on_the_prefetch():
    without, with_prefetch = _made(prefetch=False), _made(prefetch=True)
    assert _hashes(with_prefetch) == _hashes(without)
    assert _dead_records(with_prefetch) == _dead_records(without)


def _tree_after(decisions: int, limits: MCTSLimits = MCTSLimits()) -> tuple[MCTS, set[str], set[str]]:
    """A tree fed its own proposals for `decisions` decisions (rewards from the hash): (it, taken, dead)."""
    tree, taken, dead = MCTS(tiny_space(depth=4), seed=SEED, limits=limits), set(), set()
    for decision in range(decisions):
        proposal = tree.propose(decision, (), taken, dead)
        tree.add(Observation(tuple(proposal.operator.path), int(proposal.operator.hash[:2], 16) / 255,
                             proposal.leaf))
        taken.add(proposal.operator.hash)
        dead.update(proposal.dead)
    return tree, taken, dead


@pytest.mark.parametrize("limits", [
    MCTSLimits(max_sample_seconds=0.0),  # no time for a rollout not memoized: nothing learned at all
    MCTSLimits(max_sample_calls=3),      # sample requests run out: what came before them only
    MCTSLimits(max_restarts=2),          # walks run out: the nodes they found dead are dead
])
def test_a_limit_never_makes_a_node_dead(limits):
    """What a decision stopped by a limit records is the start of what the same decision without it records."""
    decision = 40   # (one that finds 9 dead nodes in 10 walks and 5 sample requests)
    tree, taken, dead = _tree_after(decision)
    full = tree.propose(decision, (), taken, dead)
    assert len(full.dead) > 3 and not full.fallback
    limited = MCTS(tree.space, seed=SEED, limits=limits)
    for key in ("_n", "_sum", "_sq", "_edges"):
        setattr(limited, key, dict(getattr(tree, key)))
    cut = limited.propose(decision, (), taken, dead)
    assert cut.fallback
    assert list(cut.dead) == list(full.dead[:len(cut.dead)])
    if limits.max_sample_seconds == 0.0:
        assert cut.dead == ()
