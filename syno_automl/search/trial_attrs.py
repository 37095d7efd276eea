"""What a SynoSampler's trial holds, read and written in one place: the operator JSON (assigned, or requested by
``enqueue_trial``), the sampler's error when it could give none, and what that error means to Optuna.

Names: syno_automl.vocabulary (``syno.`` for user attributes, ``syno:`` for the sampler's system attributes).
Studies of earlier versions also hold the JSON in the system attr ``syno:operator``: it is read (first), never
written.
"""
from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import optuna
from optuna.study import Study
from optuna.trial import FrozenTrial

from syno_automl import vocabulary as V
from syno_automl.errors import EmptySpaceError, OperatorFormatError, SynoError
from syno_automl.search.mcts import SearchExhaustedError

__all__ = ["NothingLeftToPropose", "operator_text", "operator_json_of", "path_and_hash", "error_attr",
           "recorded_error", "end_study"]

_log = logging.getLogger("syno_automl.search.sampler")


class NothingLeftToPropose(SearchExhaustedError, optuna.TrialPruned):
    """suggest_operator's error for a trial the sampler found nothing left for: a SearchExhaustedError, and an
    ``optuna.TrialPruned``, so that ``study.optimize`` records the trial PRUNED with the sampler's message instead
    of raising it, and ends there (the sampler called ``study.stop()``: end_study)."""


def operator_text(system: dict[str, Any], user: dict[str, Any]) -> str | None:
    """The operator JSON in a trial's attrs, or None."""
    # an older study's system attr first: there it is the assigned operator, the user attr perhaps a request
    text = system.get(V.SYS_OPERATOR)
    if text is None:
        text = user.get(V.OPERATOR)
    return text if isinstance(text, str) else None


def operator_json_of(trial: FrozenTrial) -> str | None:
    """The operator JSON held by a trial: assigned, or requested by enqueue_trial (the user attr
    ``syno.operator``; an older study's system attr ``syno:operator`` first)."""
    return operator_text(trial.system_attrs, trial.user_attrs)


def path_and_hash(text: str) -> tuple[tuple[str, ...], str] | None:
    """(path, hash) of operator JSON, read without replaying it; None when it is not operator JSON."""
    try:
        data = json.loads(text)
        return tuple(data["path"]), str(data["hash"])
    except (TypeError, ValueError, KeyError):
        return None


def error_attr(error: Exception) -> dict[str, Any]:
    """The system attr recording why the sampler gave a trial no operator."""
    return {V.SYS_ERROR: {"type": type(error).__name__, "message": str(error)}}


def recorded_error(number: int, system: dict[str, Any]) -> SynoError | None:
    """The error error_attr recorded on trial `number`, to raise: NothingLeftToPropose for an exhausted space."""
    error = system.get(V.SYS_ERROR)
    if not isinstance(error, dict):
        return None
    kind = error.get("type")
    cls = NothingLeftToPropose if kind == "SearchExhaustedError" else (
        OperatorFormatError if kind == "OperatorFormatError" else EmptySpaceError)
    return cls(f"trial {number}: {error.get('message')}")


def end_study(study: Study, number: int, error: Exception) -> None:
    """The space has nothing left to propose: ``study.optimize`` ends after trial `number` (pruned with the
    message: NothingLeftToPropose). Outside optimize (ask and tell) Optuna refuses stop(): the trial's error
    says it."""
    _log.warning("SynoSampler: trial %d: %s; the study stops", number, error)
    with contextlib.suppress(RuntimeError):
        study.stop()
