"""SynoSampler's incremental state (issue 34, item 12): folding in only the trials finished since the last decision,
and learning the rollouts recorded on the trials, gives the state and the proposals of a full rebuild."""
from __future__ import annotations

import threading

import optuna
import pytest
from _syno_helpers import objective, tiny_space
from optuna.trial import TrialState

from syno_automl.runtime.timing_signal import timing_in_progress
from syno_automl.search import prefetch as prefetch_module
from syno_automl.search import sampler as sampler_module
from syno_automl.search.mcts import MCTS, Observation, RolloutFact
from syno_automl.search.sampler import SynoSampler
from syno_automl.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)

SEED = 7
ROLLOUTS = "syno:rollouts"


def _sampler(prefetch: bool = False) -> SynoSampler:
    # no prefetch thread by default: the checks below read the memoized rollouts, which a prefetch adds to
    return SynoSampler(tiny_space(depth=5), seed=SEED, prefetch=prefetch)


def _tree_state(tree: MCTS) -> tuple:
    # the statistics without the zero entries an add-then-remove leaves behind
    def nonzero(d: dict) -> dict:
        return {k: v for k, v in d.items() if v}
    return nonzero(tree._n), nonzero(tree._sum), nonzero(tree._sq), nonzero(tree._edges), len(tree)


def _flaky(trial: optuna.Trial) -> float:
    value = objective(trial)
    if trial.number % 7 == 3:
        raise optuna.TrialPruned()
    if trial.number % 7 == 5:
        raise RuntimeError("boom")
    return value


def _check_against_rebuild(study: optuna.Study, live: SynoSampler) -> None:
    """`live`'s incremental state equals a new sampler's full rebuild, and both propose the same next operator
    (which also equals the proposal of a sampler that reads no recorded rollouts)."""
    live_running, live_taken = live._sync(study)
    rebuilt = _sampler()
    running, taken = rebuilt._sync(study)
    assert _tree_state(live._tree) == _tree_state(rebuilt._tree)
    assert (live_running, live_taken) == (running, taken)
    # the rollouts recorded on the trials: the rebuilt tree knows every one the live sampler sampled (but those of
    # the last check's propose below, recorded with the live sampler's next decision)
    pending = {(f.leaf, f.count) for f in live._tree._new_facts}
    assert set(live._tree._samples) - pending <= set(rebuilt._tree._samples)
    assert live._records.dead == rebuilt._records.dead  # the dead nodes the decisions found, read back
    number = len(study.trials)
    expected = live._tree.propose(number, live_running, live_taken, live._records.dead).operator.hash
    assert rebuilt._tree.propose(number, running, taken, rebuilt._records.dead).operator.hash == expected
    blind = _sampler()  # the same trials without their recorded rollouts: the same proposal, sampled again
    copy = optuna.create_study(direction="maximize")
    for t in study.get_trials(deepcopy=True):
        t.system_attrs.pop(ROLLOUTS, None)
        copy.add_trial(t)
    running, taken = blind._sync(copy)
    assert not blind._tree._samples
    assert blind._tree.propose(number, running, taken, blind._records.dead).operator.hash == expected


@pytest.mark.parametrize("url", ["memory", "sqlite"])
def test_incremental_state_equals_a_full_rebuild_across_batches_and_workers(url, tmp_path):
    if url == "memory":
        storage = other_storage = optuna.storages.InMemoryStorage()
    else:  # two workers, each with its own storage object (and cache) on one database
        path = f"sqlite:///{tmp_path / 'shared.db'}"
        storage = make_storage(path, heartbeat_interval=None)
        other_storage = make_storage(path, heartbeat_interval=None)
    live = _sampler()
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize", sampler=live)
    other = optuna.load_study(study_name="s", storage=other_storage, sampler=_sampler())
    batches = [(study, 5), (other, 4), (study, 3), (other, 6), (study, 2)]
    for i, (s, n) in enumerate(batches):
        s.optimize(_flaky, n_trials=n, catch=(RuntimeError,))
        if i == 2:
            running = other.ask()  # a trial the other worker is still evaluating: virtual loss, taken
            assert running.user_attrs["syno.hash"]
        _check_against_rebuild(study, live)
    states = {t.state for t in study.trials}
    assert {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING} <= states
    # every proposal is distinct, and each decision recorded the rollouts it sampled
    hashes = [t.user_attrs["syno.hash"] for t in study.trials]
    assert len(set(hashes)) == len(hashes)
    recorded = [t.system_attrs[ROLLOUTS] for t in study.trials if ROLLOUTS in t.system_attrs]
    assert recorded and all(r["key"] == live._tree.facts_key for r in recorded)
    assert all(RolloutFact.from_data(d) is not None for r in recorded for d in r["facts"])


def test_rollouts_of_another_seed_or_space_are_not_learned():
    study = optuna.create_study(direction="maximize", sampler=_sampler())
    study.optimize(objective, n_trials=6)
    other_seed = SynoSampler(tiny_space(depth=5), seed=SEED + 1)
    other_seed._sync(study)
    assert not other_seed._tree._samples
    other_space = SynoSampler(tiny_space(depth=5, max_flops=5e8), seed=SEED)
    other_space._sync(study)
    assert not other_space._tree._samples
    same = _sampler()
    same._sync(study)
    assert same._tree._samples


def test_a_malformed_recorded_rollout_is_ignored_or_resampled():
    study = optuna.create_study(direction="maximize", sampler=_sampler())
    study.optimize(objective, n_trials=6)
    key = study.sampler._tree.facts_key
    copy = optuna.create_study(direction="maximize")
    for t in study.get_trials(deepcopy=True):
        if ROLLOUTS in t.system_attrs:  # garbage, and a completion whose path is not one of this leaf's
            facts = t.system_attrs[ROLLOUTS]["facts"]
            t.system_attrs[ROLLOUTS] = {"key": key, "facts": [["x"], 3, *[[f[0], f[1], f[2], [["0" * 16, [
                "0" * 16]]]] for f in facts]]}
        copy.add_trial(t)
    fresh, clean = _sampler(), _sampler()
    running, taken = fresh._sync(copy)
    clean_running, clean_taken = clean._sync(study)
    number = len(study.trials)
    assert fresh._tree.propose(number, running, taken).operator.hash == \
        clean._tree.propose(number, clean_running, clean_taken).operator.hash


def test_prefetching_changes_no_proposal():
    def run(prefetch: bool) -> list[str]:
        study = optuna.create_study(direction="maximize", sampler=_sampler(prefetch))
        study.optimize(_flaky, n_trials=20, catch=(RuntimeError,))
        return [t.user_attrs["syno.hash"] for t in study.trials]

    assert run(True) == run(False)


def test_a_prefetch_computes_the_next_decisions_rollouts_and_stops_when_told():
    space = tiny_space(depth=5)
    tree = MCTS(space, seed=SEED)
    first = tree.propose(0)
    running = [Observation(tuple(first.operator.path), None, first.leaf)]
    tree.take_new_facts()
    tree.prefetch(1, running, {first.operator.hash}, threading.Event()).join()
    prefetched = tree.take_new_facts()
    assert prefetched  # sampled ahead, reported as this tree's own
    calls = []
    original = space.sample
    space.sample = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        second = tree.propose(1, running, {first.operator.hash})
    finally:
        space.sample = original
    assert not calls and not tree.take_new_facts()  # the decision found every rollout it needed memoized
    assert second.operator.hash == MCTS(space, seed=SEED).propose(1, running, {first.operator.hash}).operator.hash
    stop = threading.Event()
    stop.set()
    fresh = MCTS(space, seed=SEED + 1)
    fresh.prefetch(0, (), (), stop).join(timeout=30)
    assert not fresh.take_new_facts()  # stopped before its first rollout


def _join_prefetches() -> None:
    for thread, _ in list(prefetch_module._prefetches):
        thread.join(timeout=60)


def test_a_prefetch_prepares_the_decisions_ahead_with_the_ones_before_running():
    space = tiny_space(depth=5)
    tree = MCTS(space, seed=SEED)
    tree.prefetch(0, (), (), threading.Event(), ahead=3).join()
    assert tree.take_new_facts()
    calls = []
    original = space.sample
    space.sample = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        running, taken, hashes = [], set(), []
        for decision in range(3):
            proposal = tree.propose(decision, running, taken)
            running.append(Observation(tuple(proposal.operator.path), None, proposal.leaf))
            taken.add(proposal.operator.hash)
            hashes.append(proposal.operator.hash)
    finally:
        space.sample = original
    assert not calls  # all three found their rollouts memoized
    blind, running, taken = MCTS(space, seed=SEED), [], set()
    for decision, expected in enumerate(hashes):
        proposal = blind.propose(decision, running, taken)
        assert proposal.operator.hash == expected
        running.append(Observation(tuple(proposal.operator.path), None, proposal.leaf))
        taken.add(proposal.operator.hash)


def test_the_rollouts_prefetched_while_a_trial_runs_are_recorded_on_it_when_it_ends():
    live = _sampler(prefetch=True)
    study = optuna.create_study(direction="maximize", sampler=live)
    study.optimize(objective, n_trials=3)
    trial = study.ask()
    _join_prefetches()
    reader = _sampler()  # another worker: reads the running trial's record (its decision's rollouts), then the rest
    reader._sync(study)
    recorded = len(study.trials[-1].system_attrs.get(ROLLOUTS, {"facts": []})["facts"])
    study.tell(trial, 0.5)
    grown = study.trials[-1].system_attrs[ROLLOUTS]
    assert grown["key"] == live._tree.facts_key and len(grown["facts"]) > recorded
    reader._sync(study)
    assert set(live._tree._samples) <= set(reader._tree._samples)  # all the live sampler sampled: recorded, read
    assert reader._records.facts_read[trial.number] == len(grown["facts"])


def test_a_decision_writes_its_attrs_in_one_transaction_on_an_rdb_storage(tmp_path, monkeypatch):
    storage = make_storage(f"sqlite:///{tmp_path / 'one.db'}", heartbeat_interval=None)

    def one_by_one(*args, **kwargs):
        raise AssertionError("an attr written in its own transaction")

    monkeypatch.setattr(storage, "set_trial_system_attr", one_by_one)
    monkeypatch.setattr(storage, "set_trial_user_attr", one_by_one)
    study = optuna.create_study(storage=storage, direction="maximize", sampler=_sampler())
    study.optimize(lambda trial: 0.5, n_trials=3)  # (suggest_operator's FLOPs constraint is Optuna's write)
    study.enqueue_trial({}, user_attrs={"syno.operator": study.trials[0].user_attrs["syno.operator"]})
    study.optimize(lambda trial: 0.5, n_trials=1)
    trials = study.trials
    assert all({"syno.operator", "syno.hash"} <= set(t.user_attrs) for t in trials)
    assert [t.system_attrs["syno:source"] for t in trials] == ["mcts"] * 3 + ["enqueued"]
    assert all(isinstance(t.system_attrs["syno:leaf"], int) for t in trials[:3])
    assert ROLLOUTS in trials[0].system_attrs
    writes = []
    original = sampler_module._write_rdb_attrs
    monkeypatch.setattr(sampler_module, "_write_rdb_attrs",
                        lambda *args: writes.append((set(args[2]), set(args[3]))) or original(*args))
    study.ask()
    assert writes == [({"syno:leaf", "syno:source", ROLLOUTS}, {"syno.operator", "syno.hash"})]  # one transaction


def test_a_prefetch_holds_its_rollouts_while_a_timing_asks_for_quiet():
    """timing_in_progress: no rollout is sampled inside the block (a trial's speed measurement); the prefetch goes
    on after it, and what it prepares is the same."""
    space = tiny_space(depth=5)
    tree = MCTS(space, seed=SEED)
    sampled_inside: list[int] = []
    inside = threading.Event()
    original = space.sample
    space.sample = lambda *a, **k: (sampled_inside.append(1) if inside.is_set() else None) or original(*a, **k)
    try:
        with timing_in_progress():
            inside.set()
            thread = tree.prefetch(0, (), (), threading.Event(), ahead=2)
            thread.join(timeout=0.5)
            assert thread.is_alive() and not tree.take_new_facts()   # held before its first rollout
            inside.clear()
        thread.join(timeout=60)
    finally:
        space.sample = original
    assert not sampled_inside and not thread.is_alive()
    reference = MCTS(space, seed=SEED)
    reference.prefetch(0, (), (), threading.Event(), ahead=2).join()
    assert sorted(f.leaf for f in tree.take_new_facts()) == sorted(f.leaf for f in reference.take_new_facts())


def test_a_held_prefetch_still_stops_when_told():
    tree = MCTS(tiny_space(depth=5), seed=SEED)
    stop = threading.Event()
    with timing_in_progress():
        thread = tree.prefetch(0, (), (), stop)
        stop.set()
        thread.join(timeout=30)
        assert not thread.is_alive() and not tree.take_new_facts()
