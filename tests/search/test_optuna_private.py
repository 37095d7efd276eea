"""optuna_private.py against the installed Optuna: every private name it reads is there and means what the
package takes it to mean, and each fallback (the name gone) gives the documented answer."""
from __future__ import annotations

import sys
import types
import warnings

import optuna
import pytest
from _syno_helpers import check_attrs_written_at_once
from optuna.storages import JournalStorage, RDBStorage, RetryFailedTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from syno_automl import optuna_private as P
from syno_automl.errors import MissingDependencyError

optuna.logging.set_verbosity(optuna.logging.WARNING)
pytestmark = [pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
              pytest.mark.filterwarnings("ignore:Heartbeat of storage")]


@pytest.fixture
def sqlite_study(tmp_path):
    storage = RDBStorage(f"sqlite:///{tmp_path / 'p.db'}", heartbeat_interval=60, grace_period=120)
    return optuna.create_study(storage=storage, study_name="p")


def _gone(monkeypatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)   # importing it now raises ImportError


def test_study_and_trial_keys(sqlite_study):
    other = optuna.create_study(storage=P.storage_of(sqlite_study), study_name="q")
    trial = other.ask()
    assert P.storage_of(other) is other._storage
    assert P.study_id_of(other) == other._study_id != P.study_id_of(sqlite_study)
    assert P.trial_id_of(trial) == trial._trial_id
    frozen = other.trials[0]
    assert P.trial_id_of(frozen) == frozen._trial_id
    # the fallbacks: a study without _study_id, a Trial without _trial_id: looked up in the storage
    bare_study = types.SimpleNamespace(_storage=other._storage, study_name="q")
    assert P.study_id_of(bare_study) == other._study_id
    bare_trial = types.SimpleNamespace(study=bare_study, number=trial.number)
    assert P.trial_id_of(bare_trial) == trial._trial_id
    with pytest.raises(MissingDependencyError, match="Study._storage"):
        P.storage_of(types.SimpleNamespace(study_name="q"))
    with pytest.raises(MissingDependencyError, match="_trial_id"):
        P.trial_id_of(types.SimpleNamespace(number=0))


def test_the_waiting_trial_popper_is_the_one_ask_uses():
    study = optuna.create_study()
    study.enqueue_trial({"x": 1.0})
    own = P.waiting_trial_popper(study)
    assert callable(own)
    taken: list[int | None] = []
    P.wrap_waiting_trial_popper(study, lambda *a, **k: taken.append(own(*a, **k)) or taken[-1])
    trial = study.ask()
    assert taken == [trial._trial_id]   # ask took the WAITING trial through it
    P.unwrap_waiting_trial_popper(study)
    assert "_pop_waiting_trial_id" not in vars(study) and P.waiting_trial_popper(study) is not None
    study.ask()
    assert taken == [trial._trial_id]


def test_rdb_storages_are_found_behind_optunas_cache(sqlite_study, tmp_path):
    storage = P.storage_of(sqlite_study)
    assert type(storage).__name__ == "_CachedStorage"   # what rdb_backend unwraps
    backend = P.rdb_backend(storage)
    assert isinstance(backend, RDBStorage) and P.readable_rdb(storage) is backend
    assert P.rdb_backend(backend) is backend
    assert P.rdb_backend(P.storage_of(optuna.create_study())) is None
    journal = JournalStorage(JournalFileBackend(str(tmp_path / "j.log")))
    assert P.rdb_backend(journal) is None and P.readable_rdb(journal) is None
    models = P.rdb_models()
    for table in ("TrialHeartbeatModel", "TrialSystemAttributeModel", "TrialUserAttributeModel"):
        assert hasattr(models, table)


def test_the_rdb_tables_gone_reads_as_a_journal(sqlite_study, monkeypatch):
    _gone(monkeypatch, "optuna.storages._rdb.models")
    assert P.rdb_models() is None and P.readable_rdb(P.storage_of(sqlite_study)) is None
    trial = sqlite_study.ask()
    assert not P.write_attrs_at_once(P.storage_of(sqlite_study), trial._trial_id, {"a": 1}, {"b": 2})
    assert "a" not in sqlite_study.trials[0].system_attrs   # nothing written: the caller writes one by one


def test_attrs_are_written_in_one_transaction(sqlite_study, monkeypatch):
    trial = sqlite_study.ask()
    storage = P.storage_of(sqlite_study)
    backend = P.rdb_backend(storage)
    sessions = []
    original = backend.scoped_session
    monkeypatch.setattr(backend, "scoped_session", lambda: sessions.append(1) or original())
    assert P.write_attrs_at_once(storage, trial._trial_id, {"a": 1, "b": [2]}, {"c": "3"})
    assert sessions == [1]   # one session, one commit
    monkeypatch.undo()
    frozen = sqlite_study.trials[0]
    assert frozen.system_attrs["a"] == 1 and frozen.system_attrs["b"] == [2] and frozen.user_attrs["c"] == "3"
    memory = optuna.create_study()
    other = memory.ask()
    assert not P.write_attrs_at_once(P.storage_of(memory), other._trial_id, {"a": 1}, {})


def test_attrs_written_at_once_add_replace_and_refuse_a_finished_trial(sqlite_study):
    check_attrs_written_at_once(sqlite_study)   # on PostgreSQL: tests/search/test_search_optuna.py


def test_attrs_by_optunas_own_write_on_other_databases(sqlite_study, monkeypatch):
    # a multi-row upsert on SQLite and PostgreSQL only; elsewhere (MySQL, ...) Optuna's write of one attr, for
    # each, in the one transaction (shown here on SQLite, as if it had no upsert)
    assert P._multi_row_upsert("sqlite") is not None and P._multi_row_upsert("postgresql") is not None
    assert P._multi_row_upsert("mysql") is None and P._multi_row_upsert("oracle") is None
    storage = P.storage_of(sqlite_study)
    trial = sqlite_study.ask()
    backend = P.rdb_backend(storage)
    monkeypatch.setattr(P, "_multi_row_upsert", lambda dialect: None)
    written = []
    original = backend._set_trial_attr_without_commit

    def recorded(session, model, trial_id, key, value):
        written.append(key)
        original(session, model, trial_id, key, value)

    monkeypatch.setattr(backend, "_set_trial_attr_without_commit", recorded)
    assert P.write_attrs_at_once(storage, trial._trial_id, {"a": 1}, {"b": 2, "c": 3})
    assert written == ["a", "b", "c"]
    assert sqlite_study.trials[0].user_attrs == {"b": 2, "c": 3}


def test_a_running_trials_user_attrs_set_at_once_and_its_cached_copy_in_step(sqlite_study, monkeypatch):
    trial = sqlite_study.ask()
    backend = P.rdb_backend(P.storage_of(sqlite_study))
    sessions = []
    original = backend.scoped_session
    monkeypatch.setattr(backend, "scoped_session", lambda: sessions.append(1) or original())
    P.set_user_attrs(trial, {"a": 1, "b": [2], "c": None})
    assert sessions == [1]   # one session, one commit (set_user_attr makes one each)
    monkeypatch.undo()
    assert trial.user_attrs == {"a": 1, "b": [2], "c": None}   # what the Trial reads, as after set_user_attr
    assert sqlite_study.trials[0].user_attrs == {"a": 1, "b": [2], "c": None}   # what the storage holds


@pytest.mark.parametrize("kind", ["memory", "fixed", "scoped session gone"])
def test_user_attrs_one_by_one_elsewhere(sqlite_study, monkeypatch, kind):
    """Another storage, another kind of trial, or Optuna's names gone: set_user_attr for each, the same attrs."""
    if kind == "memory":
        trial = optuna.create_study().ask()
    elif kind == "fixed":
        trial = optuna.trial.FixedTrial({})
    else:
        trial = sqlite_study.ask()
        _gone(monkeypatch, "optuna.storages._rdb.storage")
    calls = []
    original = type(trial).set_user_attr
    monkeypatch.setattr(type(trial), "set_user_attr", lambda t, k, v: calls.append(k) or original(t, k, v))
    P.set_user_attrs(trial, {"a": 1, "b": [2]})
    assert calls == ["a", "b"] and trial.user_attrs == {"a": 1, "b": [2]}


def test_attrs_one_by_one_without_the_scoped_session(sqlite_study, monkeypatch):
    trial = sqlite_study.ask()
    _gone(monkeypatch, "optuna.storages._rdb.storage")
    assert not P.write_attrs_at_once(P.storage_of(sqlite_study), trial._trial_id, {"a": 1}, {})


def test_the_cached_trials_are_read_while_current(sqlite_study, tmp_path):
    storage, study_id = P.storage_of(sqlite_study), P.study_id_of(sqlite_study)
    sqlite_study.tell(sqlite_study.ask(), 1.0)
    running = sqlite_study.ask()   # ask has read the storage: its cache is the study as it stands
    cached = P.current_cached_trials(storage, study_id)
    assert [(t.number, t.state) for t in cached] == [(0, TrialState.COMPLETE), (1, TrialState.RUNNING)]
    assert cached[0] is storage.get_all_trials(study_id, deepcopy=False)[0]   # the cache's own, not copied
    # another worker (its own storage object) finishes the running trial: this cache is behind
    other = optuna.load_study(study_name="p", storage=f"sqlite:///{tmp_path / 'p.db'}")
    other.tell(running.number, 2.0)
    assert P.current_cached_trials(storage, study_id) is None
    storage.get_all_trials(study_id, deepcopy=False)   # read again: current
    assert [t.state for t in P.current_cached_trials(storage, study_id)] == [TrialState.COMPLETE] * 2
    other.ask()   # and a trial it creates
    assert P.current_cached_trials(storage, study_id) is None
    # not a cached RDB storage: always read
    assert P.current_cached_trials(P.rdb_backend(storage), study_id) is None
    memory = optuna.create_study()
    memory.ask()
    assert P.current_cached_trials(P.storage_of(memory), P.study_id_of(memory)) is None


def test_the_cache_gone_reads_the_storage(sqlite_study, monkeypatch):
    sqlite_study.ask()
    storage = P.storage_of(sqlite_study)
    monkeypatch.setattr(storage, "_studies", None)
    assert P.current_cached_trials(storage, P.study_id_of(sqlite_study)) is None


def test_attrs_of_some_trials_in_one_query(sqlite_study, tmp_path):
    storage, study_id = P.storage_of(sqlite_study), P.study_id_of(sqlite_study)
    for number in range(5):
        trial = sqlite_study.ask()
        if number != 2:
            trial.set_user_attr("op", f"u{number}")
        if number in (1, 4):
            storage.set_trial_system_attr(trial._trial_id, "old", {"n": number})
        trial.set_user_attr("other", number)
    # another study in the same database: never read
    optuna.create_study(storage=storage, study_name="q").ask().set_user_attr("op", "q")
    found = P.attrs_of_trials(storage, study_id, {0, 2}, 2, "old", "op")
    assert found == {0: ({}, {"op": "u0"}), 3: ({}, {"op": "u3"}), 4: ({"old": {"n": 4}}, {"op": "u4"})}
    assert P.attrs_of_trials(storage, study_id, set(), 4, "old", "op") == {}
    journal = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(tmp_path / "j.log"))))
    assert P.attrs_of_trials(P.storage_of(journal), P.study_id_of(journal), {0}, -1, "old", "op") is None


@pytest.mark.parametrize("gone", [False, True])
def test_heartbeat_enabled(sqlite_study, tmp_path, monkeypatch, gone):
    if gone:
        _gone(monkeypatch, "optuna.storages._heartbeat")
    silent = RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    assert P.heartbeat_enabled(P.storage_of(sqlite_study))
    assert not P.heartbeat_enabled(silent)
    assert not P.heartbeat_enabled(P.storage_of(optuna.create_study()))


def test_a_wrapped_sampler_is_found():
    inner = optuna.samplers.RandomSampler(seed=0)
    assert P.wrapped_sampler(optuna.samplers.PartialFixedSampler({"x": 1.0}, inner)) is inner
    assert P.wrapped_sampler(inner) is None
    moved = types.SimpleNamespace(_base=inner)   # an Optuna where the attribute moved: not looked through
    assert P.wrapped_sampler(moved) is None


def test_retry_history_reads_optunas_record():
    frozen = optuna.trial.create_trial(state=TrialState.FAIL, system_attrs={P.RETRY_HISTORY: [0, 3]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        public = RetryFailedTrialCallback.retry_history(frozen)
    assert P.retry_history(frozen.system_attrs) == public == [0, 3]
    assert P.retry_history({}) == [] and P.retry_history({P.RETRY_HISTORY: "junk"}) == []


def test_has_constraint_public_and_by_optunas_attr():
    study = optuna.create_study()
    trial = study.ask()
    assert not P.has_constraint(trial, "flops")
    trial.set_constraint("flops", -0.5)
    assert P.has_constraint(trial, "flops") and not P.has_constraint(trial, "other")
    # an Optuna without Trial.constraints: Optuna's system attr "constraints:<name>" is read
    bare = types.SimpleNamespace(storage=trial.storage, _trial_id=trial._trial_id)
    assert P.has_constraint(bare, "flops") and not P.has_constraint(bare, "other")
