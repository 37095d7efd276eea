"""Every private Optuna name this package uses, in one place: each with why it is used and what happens on an Optuna
where it is gone (its fallback). Nothing else in the package reaches into Optuna's private modules or attributes;
``tests/search/test_optuna_private.py`` checks each against the installed Optuna, and ``pyproject.toml`` bounds
``optuna`` below the next major version, where these are most likely to move.

Name (why; the fallback where it is gone):

- ``Study._storage`` (the study's storage: no public handle; MissingDependencyError naming the version);
- ``Study._study_id`` (the study's key in it; ``storage.get_study_id_from_name``);
- ``Trial._trial_id``, ``FrozenTrial._trial_id`` (the trial's key; a Trial's looked up by its number, a
  FrozenTrial's MissingDependencyError);
- ``Study._pop_waiting_trial_id`` (how ``ask`` takes a WAITING trial, recorded by study/lost_trials.py; not
  wrapped: only the trials ``ask`` creates are recorded);
- ``_CachedStorage._backend`` (the RDBStorage behind Optuna's cache; only a bare RDBStorage is seen as one);
- ``_CachedStorage._studies[study_id].trials``, ``._lock`` (the trials the cache read last, which ``Study.ask`` has
  just refreshed: a decision reads them instead of the storage again; the storage read);
- ``optuna.storages._rdb.models`` (the heartbeat and attr tables; no RDB reading: as for a journal storage);
- ``optuna.storages._rdb.storage._create_scoped_session``, ``RDBStorage._set_trial_attr_without_commit``,
  ``TrialModel.find_or_raise_by_id`` (several attrs in one transaction; one commit per attr);
- ``Trial._cached_frozen_trial`` (the running Trial's copy of its attrs, which ``Trial.set_user_attr`` keeps in step
  and ``Trial.user_attrs`` reads: kept in step when several are written at once; one ``set_user_attr`` each);
- ``optuna.storages._heartbeat.is_heartbeat_enabled`` (whether the storage beats; ``get_heartbeat_interval()``);
- ``PartialFixedSampler._base_sampler`` (the sampler a wrapper delegates to; not looked through: pass
  ``space=`` to suggest_operator);
- the system attrs ``retry_history`` (Optuna's retry record; no retry seen) and ``constraints:<name>``
  (Trial.set_constraint's record; the public ``Trial.constraints`` first).
"""
from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

from optuna.samplers import BaseSampler
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState

from syno_automl.errors import MissingDependencyError
from syno_automl.interrupt import deferred_interrupt

__all__ = ["storage_of", "study_id_of", "trial_id_of", "waiting_trial_popper", "wrap_waiting_trial_popper",
           "unwrap_waiting_trial_popper", "rdb_backend", "readable_rdb", "rdb_models", "write_attrs_at_once",
           "set_user_attrs", "heartbeat_enabled", "wrapped_sampler", "retry_history", "RETRY_HISTORY", "has_constraint",
           "current_cached_trials", "attrs_of_trials"]

#: the system attr where Optuna's RetryFailedTrialCallback lists the trials a retry follows (its public reader,
#: RetryFailedTrialCallback.retry_history, warns ExperimentalWarning at every call: read here once per trial)
RETRY_HISTORY = "retry_history"
_CONSTRAINT_PREFIX = "constraints:"   # Trial.set_constraint's system attr, one per name
_POP_WAITING = "_pop_waiting_trial_id"
_WRAPPER_ATTRS = ("_base_sampler",)   # where an Optuna wrapper keeps the sampler it delegates to


def _private(module: str, name: str | None = None) -> Any:
    """Optuna's private `module` (or its attribute `name`), None where it is gone."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        return None
    return found if name is None else getattr(found, name, None)


def _gone(what: str) -> MissingDependencyError:
    import optuna

    return MissingDependencyError(f"the installed Optuna {optuna.__version__} has no {what}, which syno_automl "
                                  f"reads (syno_automl/optuna_private.py); install optuna>=4,<6")


# -- a study's and a trial's keys in their storage ----------------------------------------------------------
def storage_of(study: Any) -> Any:
    """The study's storage (``Study._storage``): the sampler reads the trials without copying them and writes a
    trial's attrs, which Optuna's public Study only offers per trial and copied."""
    storage = getattr(study, "_storage", None)
    if storage is None:
        raise _gone("Study._storage")
    return storage


def study_id_of(study: Any) -> int:
    """The study's id in its storage (``Study._study_id``; else looked up by name, a storage query)."""
    study_id = getattr(study, "_study_id", None)
    return int(study_id) if study_id is not None else storage_of(study).get_study_id_from_name(study.study_name)


def trial_id_of(trial: Any) -> int:
    """The trial's id in its storage (``_trial_id`` of a Trial or FrozenTrial; a Trial's else looked up by its
    number, a storage query)."""
    trial_id = getattr(trial, "_trial_id", None)
    if trial_id is not None:
        return int(trial_id)
    study = getattr(trial, "study", None)
    if study is None:
        raise _gone(f"{type(trial).__name__}._trial_id")
    return storage_of(study).get_trial_id_from_study_id_trial_number(study_id_of(study), trial.number)


def waiting_trial_popper(study: Any) -> Any:
    """``Study._pop_waiting_trial_id``, the call by which ``study.ask()`` takes a WAITING trial (enqueued, or a
    retry) and makes it RUNNING; None where it is gone (then only the trials it creates can be recorded)."""
    return getattr(study, _POP_WAITING, None)


def wrap_waiting_trial_popper(study: Any, wrapper: Any) -> None:
    """Puts `wrapper` in place of the study's own popper (an instance attribute: undone by the next call)."""
    setattr(study, _POP_WAITING, wrapper)


def unwrap_waiting_trial_popper(study: Any) -> None:
    """The study's own popper again."""
    vars(study).pop(_POP_WAITING, None)


# -- RDB storages ------------------------------------------------------------------------------------------
def rdb_backend(storage: Any) -> RDBStorage | None:
    """The RDBStorage behind `storage` (Optuna wraps one in its ``_CachedStorage``, kept in ``_backend``), or None
    when it is not one (in-memory, journal, gRPC)."""
    backend = getattr(storage, "_backend", storage) if type(storage).__name__ == "_CachedStorage" else storage
    return backend if isinstance(backend, RDBStorage) else None


def rdb_models() -> Any:
    """``optuna.storages._rdb.models`` (the tables: heartbeats, trial attrs), or None where it is gone. Imported
    when asked: SQLAlchemy is loaded once an RDB storage exists, not with this module."""
    models: ModuleType | None = _private("optuna.storages._rdb.models")
    return models


def readable_rdb(storage: Any) -> RDBStorage | None:
    """The RDBStorage behind `storage` when this Optuna's tables can be read here (rdb_models), else None: the
    callers then treat it as a storage whose heartbeats they cannot read (a journal's)."""
    backend = rdb_backend(storage)
    return backend if backend is not None and rdb_models() is not None else None


def write_attrs_at_once(storage: Any, trial_id: int, system: dict[str, Any], user: dict[str, Any]) -> bool:
    """Sets a trial's system and user attrs in one transaction when `storage` is an RDB storage: False when it is
    not (or this Optuna lacks the internals used), and nothing was written (the caller writes them one by one).
    Held from a Ctrl-C, as a storage write.

    Optuna has no public call for several attrs, and its RDBStorage commits each (a disk sync on SQLite). Here, in
    one ``_create_scoped_session``: on SQLite and PostgreSQL the trial is looked up and checked once
    (``TrialModel.find_or_raise_by_id``, ``check_trial_is_updatable``) and each table's attrs are one multi-row
    upsert, as Optuna's ``_set_trial_attr_without_commit`` writes one (about 3 ms an attr on SQLite: a lookup and
    a statement each); on other databases that call for each attr."""
    backend = rdb_backend(storage)
    write = getattr(backend, "_set_trial_attr_without_commit", None)
    models = rdb_models()
    scoped = _private("optuna.storages._rdb.storage", "_create_scoped_session")
    if backend is None or write is None or models is None or scoped is None:
        return False
    if not system and not user:
        return True
    tables = ((models.TrialSystemAttributeModel, system), (models.TrialUserAttributeModel, user))
    upsert = _multi_row_upsert(backend.engine.name)
    with deferred_interrupt(), scoped(backend.scoped_session, True) as session:
        if upsert is None:
            for model, attrs in tables:
                for key, value in attrs.items():
                    write(session, model, trial_id, key, value)
            return True
        trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
        backend.check_trial_is_updatable(trial_id, trial.state)
        for model, attrs in tables:
            if attrs:
                session.execute(upsert(model, [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)}
                                               for key, value in attrs.items()]))
    return True


def set_user_attrs(trial: Any, attrs: dict[str, Any]) -> None:
    """Sets a running trial's user attrs (what ``trial.set_user_attr`` does for each): in one transaction on an
    RDB storage (:func:`write_attrs_at_once`: one commit, a disk sync on SQLite, instead of one per attr), the
    Trial's cached copy (``Trial._cached_frozen_trial``) updated as ``set_user_attr`` updates it; one
    ``set_user_attr`` each for any other trial (a FixedTrial, a user's own), storage, or where the names are gone."""
    cached = getattr(trial, "_cached_frozen_trial", None)
    storage = getattr(trial, "storage", None)
    if (len(attrs) > 1 and isinstance(cached, FrozenTrial) and storage is not None
            and write_attrs_at_once(storage, trial_id_of(trial), {}, attrs)):
        cached.user_attrs.update(attrs)
        return
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def _multi_row_upsert(dialect: str) -> Callable[[Any, list[dict[str, Any]]], Any] | None:
    """A builder of one INSERT ... ON CONFLICT (trial_id, key) DO UPDATE of several rows, as Optuna writes one row
    on SQLite (3.24 and later) and PostgreSQL; None on other databases (Optuna's own write for each)."""
    import sqlite3

    if dialect == "sqlite" and sqlite3.sqlite_version_info >= (3, 24, 0):
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    else:
        return None

    def build(model: Any, rows: list[dict[str, Any]]) -> Any:
        statement = insert(model).values(rows)
        return statement.on_conflict_do_update(index_elements=[model.trial_id, model.key],
                                               set_={"value_json": statement.excluded.value_json})
    return build


def current_cached_trials(storage: Any, study_id: int) -> list[FrozenTrial] | None:
    """The study's trials as Optuna's cache over an RDB storage holds them (``_CachedStorage``: sorted by number,
    not copied), when that is the study as it stands: as many trials in each state as the storage counts now (one
    small query); else None (not such a storage, or the cache is behind: read ``get_all_trials``).

    Why: ``get_all_trials`` on an RDB storage reads the unfinished trials again each time with all their attrs
    (about 7 ms on SQLite however few), and ``Study.ask`` has just done so before it calls the sampler. Equal
    counts mean equal states (a trial's state only moves forward: WAITING, RUNNING, finished); what may be behind is
    the attrs of a trial still running, as a read a moment earlier would be."""
    backend = readable_rdb(storage)
    cache = getattr(storage, "_studies", None)
    lock = getattr(storage, "_lock", None)
    if backend is None or backend is storage or not isinstance(cache, dict) or lock is None:
        return None
    with lock:
        info = cache.get(study_id)
        trials = getattr(info, "trials", None)
        if not isinstance(trials, dict):
            return None
        cached = sorted(trials.values(), key=lambda t: t.number)
    import sqlalchemy as sa  # here: loaded with an RDB storage, not with this module

    table = rdb_models().TrialModel.__table__
    query = sa.select(table.c.state, sa.func.count()).where(table.c.study_id == study_id).group_by(table.c.state)
    with backend.engine.connect() as connection:
        counts = {TrialState(state) if not isinstance(state, TrialState) else state: n
                  for state, n in connection.execute(query).all()}
    return cached if counts == Counter(t.state for t in cached) else None


def attrs_of_trials(storage: Any, study_id: int, numbers: Collection[int], above: int, system_key: str,
                    user_key: str) -> dict[int, tuple[dict[str, Any], dict[str, Any]]] | None:
    """{number: (system attrs, user attrs)} of the study's trials numbered in `numbers` or above `above`, each
    holding only `system_key` and `user_key` where set (trials with neither are left out): one query on an RDB
    storage, None on any other (read ``get_all_trials``). Why: a decision checks a few trials' operator after
    writing its own, and ``get_all_trials`` would read every unfinished trial's attrs again."""
    backend = readable_rdb(storage)
    if backend is None:
        return None
    import sqlalchemy as sa  # here: loaded with an RDB storage, not with this module

    models = rdb_models()
    trials = models.TrialModel.__table__
    found: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    picked = sa.or_(trials.c.number > above, trials.c.number.in_(sorted(numbers)))
    with backend.engine.connect() as connection:
        for index, (model, key) in enumerate(((models.TrialSystemAttributeModel, system_key),
                                              (models.TrialUserAttributeModel, user_key))):
            attrs = model.__table__
            query = (sa.select(trials.c.number, attrs.c.value_json)
                     .join(attrs, attrs.c.trial_id == trials.c.trial_id)
                     .where(trials.c.study_id == study_id, attrs.c.key == key, picked))
            for number, value_json in connection.execute(query).all():
                found.setdefault(number, ({}, {}))[index][key] = json.loads(value_json)
    return found


def heartbeat_enabled(storage: Any) -> bool:
    """Whether `storage` records heartbeats (``optuna.storages._heartbeat.is_heartbeat_enabled``, which Optuna
    exports from no public module; else its public ``get_heartbeat_interval()``)."""
    is_heartbeat_enabled = _private("optuna.storages._heartbeat", "is_heartbeat_enabled")
    if is_heartbeat_enabled is None:
        interval = getattr(storage, "get_heartbeat_interval", None)
        return callable(interval) and interval() is not None
    return bool(is_heartbeat_enabled(storage))


# -- samplers and trials -----------------------------------------------------------------------------------
def wrapped_sampler(sampler: Any) -> BaseSampler | None:
    """The sampler an Optuna wrapper delegates its decisions to (PartialFixedSampler's ``_base_sampler``), or None
    (not a wrapper, or one whose attribute has moved: suggest_operator then needs its ``space=``)."""
    for name in _WRAPPER_ATTRS:
        inner = getattr(sampler, name, None)
        if isinstance(inner, BaseSampler):
            return inner
    return None


def retry_history(system_attrs: dict[str, Any]) -> list[int]:
    """The trial numbers a retried trial follows (RetryFailedTrialCallback's record); [] when none or unreadable."""
    history = system_attrs.get(RETRY_HISTORY, ())
    return [n for n in history if isinstance(n, int)] if isinstance(history, (list, tuple)) else []


def has_constraint(trial: Any, name: str) -> bool:
    """Whether ``trial.set_constraint(name, ...)`` was called on it (a retried trial has its failed one's): the
    public ``Trial.constraints`` where it exists, else Optuna's system attr ``constraints:<name>``."""
    constraints = getattr(trial, "constraints", None)
    if isinstance(constraints, dict):
        return name in constraints
    return f"{_CONSTRAINT_PREFIX}{name}" in trial.storage.get_trial_system_attrs(trial_id_of(trial))
