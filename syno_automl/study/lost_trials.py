"""Trials a worker created but never ran. Optuna creates a trial (RUNNING) in ``study.ask()``, then the sampler
assigns its operator, and only then starts the heartbeat and the objective: a Ctrl-C or a kill in between leaves a
RUNNING trial with no heartbeat, which Optuna's stale-trial check skips (it judges heartbeats only) and which no
``--resume`` would ever end. This worker fails its own such trial when it is interrupted; a ``--resume`` fails any
other that has gone without a heartbeat for longer than the grace period.

Their MLflow runs: a stopped worker's trial run can stay RUNNING (a SIGKILL, or a signal landing between the run's
creation and the moment the trial knows it); :func:`end_trial_run` ends this worker's when it is interrupted,
:func:`end_orphan_trial_runs` ends any whose trial has ended when a search starts. :func:`stale_trials` names the
RUNNING trials whose worker is gone, for ``syno-automl show``."""
from __future__ import annotations

import datetime
from typing import Any

import optuna
from optuna.trial import TrialState

from syno_automl import vocabulary as V
from syno_automl.interrupt import deferred_interrupt
from syno_automl.optuna_private import (
    rdb_models,
    readable_rdb,
    storage_of,
    study_id_of,
    trial_id_of,
    unwrap_waiting_trial_popper,
    waiting_trial_popper,
    wrap_waiting_trial_popper,
)

__all__ = ["fail_unstarted", "fail_lost_in_creation", "LOST_IN_CREATION", "TrialsCreated", "end_trial_run",
           "end_final_runs", "end_orphan_trial_runs", "stale_trials", "STALE", "DEFAULT_GRACE_SECONDS"]

LOST_IN_CREATION = "lost before it started: the worker stopped between creating the trial and training it"
ORPHAN_RUN = "its worker stopped before ending it (the trial is {state})"
#: what `syno-automl show` says of a RUNNING trial whose worker is gone
STALE = "stale: `--resume` retries it"
#: a search's grace period by default (storage.make_storage: 3 heartbeats of 10 s)
DEFAULT_GRACE_SECONDS = 30.0


def _fail(study: optuna.Study, trial_id: int, reason: str) -> None:
    storage = storage_of(study)
    storage.set_trial_user_attr(trial_id, V.FAILURE, reason)
    storage.set_trial_state_values(trial_id, TrialState.FAIL)


def fail_unstarted(study: optuna.Study, trial_id: int | None, reason: str) -> bool:
    """Fails the trial `trial_id` when it is still RUNNING (this worker created it and was stopped before Optuna
    could tell its result); returns whether it did."""
    if trial_id is None:
        return False
    if storage_of(study).get_trial(trial_id).state != TrialState.RUNNING:
        return False
    _fail(study, trial_id, reason)
    return True


class TrialsCreated:
    """Records the trials this worker's ``study.ask()`` makes RUNNING (a new one, or a WAITING one it takes), each
    id kept in the same deferred block as the storage's write (syno_automl.interrupt): a signal cannot fall between
    the two, so that an interrupted worker knows every trial it left RUNNING, even one stopped before its sampler
    or objective saw it. Wraps the study's ``_pop_waiting_trial_id`` and its storage's ``create_new_trial`` (the two
    ways Optuna's ask makes a RUNNING trial) until :meth:`stop`. `ids`: the study's; `others`: those of other
    studies in the same storage object (the fidelity companion's, search/fidelity.py)."""

    def __init__(self, study: optuna.Study) -> None:
        self.ids: list[int] = []
        self.others: list[int] = []
        self._study = study
        storage, own_id = storage_of(study), study_id_of(study)
        create, pop = storage.create_new_trial, waiting_trial_popper(study)

        def create_new_trial(study_id: int, *args: Any, **kwargs: Any) -> int:
            with deferred_interrupt():
                trial_id = create(study_id, *args, **kwargs)
                (self.ids if study_id == own_id else self.others).append(trial_id)
                return trial_id

        def pop_waiting_trial_id(*args: Any, **kwargs: Any) -> int | None:
            with deferred_interrupt():
                trial_id = pop(*args, **kwargs)
                if trial_id is not None:
                    self.ids.append(trial_id)
                return trial_id

        storage.create_new_trial = create_new_trial   # type: ignore[method-assign]
        if pop is not None:
            wrap_waiting_trial_popper(study, pop_waiting_trial_id)

    def stop(self) -> None:
        """The study and its storage as they were."""
        vars(storage_of(self._study)).pop("create_new_trial", None)
        unwrap_waiting_trial_popper(self._study)


def fail_lost_in_creation(study: optuna.Study, grace_seconds: float | None = None) -> list[int]:
    """Fails the study's RUNNING trials that never recorded a heartbeat and started over `grace_seconds` ago (by
    default the storage's grace period) (RDB storages with heartbeats: a live trial of another worker records one
    within seconds of its start); returns their numbers."""
    rdb = readable_rdb(storage_of(study))
    if rdb is None or rdb.heartbeat_interval is None:
        return []
    if grace_seconds is None:
        grace_seconds = rdb.grace_period or 2 * rdb.heartbeat_interval
    models = rdb_models()
    with rdb.scoped_session() as session:
        beating = {row.trial_id for row in session.query(models.TrialHeartbeatModel.trial_id).all()}
    now = datetime.datetime.now()
    lost = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        started = trial.datetime_start
        if trial_id_of(trial) in beating or started is None:
            continue
        if (now - started).total_seconds() > grace_seconds:
            _fail(study, trial_id_of(trial), LOST_IN_CREATION)
            lost.append(trial.number)
    return lost


def end_trial_run(tracker: Any, study_name: str, number: int, reason: str) -> bool:
    """Ends (KILLED, with `reason`) the MLflow run of trial `number` when it is still RUNNING; returns whether it
    did. Never raises: logging never stops a search."""
    try:
        found = tracker.find_trial_run(study_name, number=number)
        if found is None or found.info.status != "RUNNING":
            return False
        run = tracker.run(found.info.run_id)
        run.log_failure(reason)
        run.finish("KILLED")
        return True
    except Exception:  # noqa: BLE001 -- best effort
        return False


def end_final_runs(tracker: Any, study_name: str, since: float, reason: str) -> int:
    """Ends (KILLED, with `reason`) the study's final-stage runs still RUNNING that started at `since` (epoch
    seconds) or later: this process's final stage, stopped between creating a run and training its model (the
    stage ends its runs once their training has begun). Returns how many; never raises."""
    try:
        ended = 0
        for found in tracker.final_runs(study_name, running=True):
            if found.info.start_time is not None and found.info.start_time >= since * 1000:
                run = tracker.run(found.info.run_id)
                run.log_failure(reason)
                run.finish("KILLED")
                ended += 1
        return ended
    except Exception:  # noqa: BLE001 -- best effort: the next final stage ends them (finalists.py)
        return 0


def end_orphan_trial_runs(study: optuna.Study, tracker: Any, study_name: str) -> list[int]:
    """Ends (KILLED) the study's MLflow trial runs still RUNNING whose Optuna trial has ended (or does not exist):
    their worker was stopped before it could end them. A run of a trial still RUNNING or WAITING is left alone (a
    live worker's, or one a --resume retries: Optuna's retry ends it, see Objective._close_lost_run). Returns the
    trial numbers; never raises."""
    try:
        runs = tracker.client.search_runs(
            [tracker.experiment_id], max_results=1000,
            filter_string=f"tags.`{V.TAG_STUDY}` = '{study_name}' and tags.`{V.TAG_ROLE}` = 'trial' "
                          f"and attributes.status = 'RUNNING'")
        if not runs:
            return []
        states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
        ended = []
        for found in runs:
            try:
                number = int(found.data.tags.get(V.TAG_TRIAL, ""))
            except ValueError:
                continue
            state = states.get(number)
            if state in (TrialState.RUNNING, TrialState.WAITING):
                continue
            run = tracker.run(found.info.run_id)
            run.log_failure(ORPHAN_RUN.format(state=state.name if state is not None else "missing"))
            run.finish("KILLED")
            ended.append(number)
        return ended
    except Exception:  # noqa: BLE001 -- best effort
        return []


def stale_trials(study: optuna.Study, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> set[int]:
    """The numbers of the study's RUNNING trials whose worker is gone: no heartbeat for over `grace_seconds`, or
    none ever and started over `grace_seconds` ago (RDB storages: a live worker beats every few seconds, whatever
    heartbeat the reader opened the storage with). Empty where it cannot tell (a journal storage)."""
    rdb = readable_rdb(storage_of(study))
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if rdb is None or not running:
        return set()
    import sqlalchemy

    models = rdb_models()
    with rdb.scoped_session() as session:
        now = session.execute(sqlalchemy.func.now()).scalar().replace(tzinfo=None)   # the clock beats use
        beats = {row.trial_id: row.heartbeat for row in
                 session.query(models.TrialHeartbeatModel.trial_id, models.TrialHeartbeatModel.heartbeat).all()}
    local_now = datetime.datetime.now()
    stale = set()
    for trial in running:
        beat = beats.get(trial_id_of(trial))
        if beat is not None:
            silent = (now - beat.replace(tzinfo=None)).total_seconds()
        elif trial.datetime_start is not None:
            silent = (local_now - trial.datetime_start).total_seconds()
        else:
            continue
        if silent > grace_seconds:
            stale.add(trial.number)
    return stale
