"""The operator of a trial a stop signal interrupted is tried again: the interrupted worker queues a retry of it (a
WAITING trial with the same operator) before it exits, so that the next worker -- a ``--resume`` -- runs it first,
as Optuna's heartbeat retry does for a trial whose worker was killed (its system attrs ``failed_trial`` and
``retry_history``, which the sampler and ``remaining_trials`` already read: the failed attempt is not held against
the operator and does not count). An interrupted and resumed search then evaluates the same operators as an
uninterrupted one. Queued by the worker that owned the trial, so two workers resuming at once cannot queue it
twice. :func:`retries` names, for ``syno-automl show``, which trial retries which."""
from __future__ import annotations

from collections.abc import Iterable

import optuna
from optuna.trial import FrozenTrial, TrialState

from syno_automl import vocabulary as V
from syno_automl.interrupt import STOP_REASONS
from syno_automl.optuna_private import retry_history, storage_of, study_id_of

__all__ = ["requeue_interrupted", "retries", "retry_note"]

#: Optuna's names (optuna.storages.RetryFailedTrialCallback): the trial retried first, and every attempt before
FAILED_TRIAL, RETRY_HISTORY = "failed_trial", "retry_history"
# written while a trial runs: its retry starts without them (its own run, no failure yet)
_NOT_CARRIED = (V.FAILURE, V.RUN_ID)


def _has_operator(trial: FrozenTrial) -> bool:
    return V.SYS_SOURCE in trial.system_attrs or V.SYS_OPERATOR in trial.system_attrs or \
        V.OPERATOR in trial.user_attrs


def _interrupted(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.FAIL and trial.user_attrs.get(V.FAILURE) in STOP_REASONS.values()


def requeue_interrupted(study: optuna.Study, trial_ids: Iterable[int | None]) -> list[int]:
    """Queues a retry of each of these trials (this worker's) that a stop signal failed and that has an operator
    (not the baseline: a resume enqueues that itself, study.opening), once; returns the retries' numbers. Never
    raises: the interrupt is what the caller reports."""
    queued = []
    for trial_id in sorted({i for i in trial_ids if i is not None}):
        try:
            trial = storage_of(study).get_trial(trial_id)
            if not _interrupted(trial) or trial.user_attrs.get(V.BASELINE) or not _has_operator(trial):
                continue
            if trial.number in retries(study):
                continue
            system = {FAILED_TRIAL: trial.number, **trial.system_attrs}
            system[RETRY_HISTORY] = [*retry_history(system), trial.number]
            user = {k: v for k, v in trial.user_attrs.items() if k not in _NOT_CARRIED}
            retry = optuna.trial.create_trial(state=TrialState.WAITING, user_attrs=user, system_attrs=system)
            retry_id = storage_of(study).create_new_trial(study_id_of(study), template_trial=retry)
            queued.append(storage_of(study).get_trial_number_from_id(retry_id))
        except Exception:  # noqa: BLE001 -- best effort: the resume then runs another operator in its place
            continue
    return queued


def retries(study: optuna.Study) -> dict[int, int]:
    """Trial number -> the number of the trial that retried it (heartbeat or interrupt), the latest retry."""
    found: dict[int, int] = {}
    for t in study.get_trials(deepcopy=False):
        history = t.system_attrs.get(RETRY_HISTORY)
        if isinstance(history, list) and history:
            found[history[-1]] = t.number
    return found


def retry_note(trial: FrozenTrial, retried_as: int | None) -> str | None:
    """What `show` says of a retried trial or a retry (None: neither): ``retried as trial N`` / ``retries trial N``."""
    if retried_as is not None:
        return f"retried as trial {retried_as}"
    history = trial.system_attrs.get(RETRY_HISTORY)
    if isinstance(history, list) and history and not trial.state.is_finished():
        return f"retries trial {history[-1]}'s operator"
    return None
