"""Trials a worker created but never ran. Optuna creates a trial (RUNNING) in ``study.ask()``, then the sampler
assigns its operator, and only then starts the heartbeat and the objective: a Ctrl-C or a kill in between leaves a
RUNNING trial with no heartbeat, which Optuna's stale-trial check skips (it judges heartbeats only) and which no
``--resume`` would ever end. This worker fails its own such trial when it is interrupted; a ``--resume`` fails any
other that has gone without a heartbeat for longer than the grace period."""
from __future__ import annotations

import datetime
from typing import Any

import optuna
from optuna.trial import TrialState

from syno_automl import vocabulary as V

__all__ = ["fail_unstarted", "fail_lost_in_creation", "LOST_IN_CREATION"]

LOST_IN_CREATION = "lost before it started: the worker stopped between creating the trial and training it"


def _fail(study: optuna.Study, trial_id: int, reason: str) -> None:
    storage = study._storage
    storage.set_trial_user_attr(trial_id, V.FAILURE, reason)
    storage.set_trial_state_values(trial_id, TrialState.FAIL)


def fail_unstarted(study: optuna.Study, trial_id: int | None, reason: str) -> bool:
    """Fails the trial `trial_id` when it is still RUNNING (this worker created it and was stopped before Optuna
    could tell its result); returns whether it did."""
    if trial_id is None:
        return False
    if study._storage.get_trial(trial_id).state != TrialState.RUNNING:
        return False
    _fail(study, trial_id, reason)
    return True


def _rdb(storage: Any) -> Any:
    backend = getattr(storage, "_backend", storage)   # Optuna wraps an RDBStorage in a cache
    return backend if isinstance(backend, optuna.storages.RDBStorage) else None


def fail_lost_in_creation(study: optuna.Study, grace_seconds: float | None = None) -> list[int]:
    """Fails the study's RUNNING trials that never recorded a heartbeat and started over `grace_seconds` ago (by
    default the storage's grace period) (RDB storages with heartbeats: a live trial of another worker records one
    within seconds of its start); returns their numbers."""
    rdb = _rdb(study._storage)
    if rdb is None or rdb.heartbeat_interval is None:
        return []
    if grace_seconds is None:
        grace_seconds = rdb.grace_period or 2 * rdb.heartbeat_interval
    from optuna.storages._rdb import models

    with rdb.scoped_session() as session:
        beating = {row.trial_id for row in session.query(models.TrialHeartbeatModel.trial_id).all()}
    now = datetime.datetime.now()
    lost = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        started = trial.datetime_start
        if trial._trial_id in beating or started is None:
            continue
        if (now - started).total_seconds() > grace_seconds:
            _fail(study, trial._trial_id, LOST_IN_CREATION)
            lost.append(trial.number)
    return lost
