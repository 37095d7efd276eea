"""Opening the search's Optuna study: created with the baseline (and the opening's known operators) enqueued, or
resumed after checks that it was made for the same task, settings and space; how many trials a worker still runs;
the sampler's reward and the study's pruner."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from syno_automl import known
from syno_automl import vocabulary as V
from syno_automl.config import (
    SearchConfig,
    StudyExistsError,
    StudyMismatchError,
    describe_diff,
    settings_diff,
    with_legacy_settings,
)
from syno_automl.errors import NotFoundError
from syno_automl.interrupt import STOP_REASONS
from syno_automl.optuna_private import heartbeat_enabled, retry_history, storage_of
from syno_automl.search.fidelity import make_pruner
from syno_automl.search.objectives import speed_objective_names
from syno_automl.search.pareto import ParetoReward
from syno_automl.search.reward import Reward
from syno_automl.search.sampler import SynoSampler
from syno_automl.study.context import SearchContext
from syno_automl.study.lost_trials import LOST_IN_CREATION, fail_lost_in_creation
from syno_automl.study.storage import make_storage, study_names
from syno_automl.study.trial_speed import choose_speed_objective, record_speed_objective

__all__ = ["check_study", "check_resumed", "open_study", "remaining_trials", "sampler_reward"]


def sampler_reward(config: SearchConfig, context: SearchContext) -> Reward | ParetoReward:
    """The SynoSampler's reward of a trial: the task's reward of its value (pareto: credited at a speedup)."""
    reward = context.task.reward(config, context.num_classes)
    # pareto: accuracy is credited only at a speedup over the replaced layers (syno_automl.search.pareto)
    return ParetoReward(reward, speedup=config.reward_speedup) if config.objective == "pareto" else reward


def _study_pruner(config: SearchConfig, context: SearchContext) -> optuna.pruners.BasePruner:
    """The search study's own pruner: an accuracy study prunes through it; a pareto study cannot (Optuna's
    pruners are single-objective): its trials report to the companion study instead (search.fidelity)."""
    if config.objective == "pareto" or not context.task.prunes_in_study:
        return optuna.pruners.NopPruner()
    return make_pruner(config.pruner, config.epochs)


def check_study(config: SearchConfig, resume: bool, storage: optuna.storages.BaseStorage | None = None) -> bool:
    """Whether the study exists. Raises StudyExistsError when it does and `resume` is False; with `resume`,
    LookupError when it does not, StudyMismatchError when it was made for another task or training settings."""
    path = config.storage[len("sqlite:///"):] if config.storage.startswith("sqlite:///") else None
    if resume and path is not None and not Path(path).exists():  # never create a database to resume
        raise NotFoundError(f"no study {config.study!r} to resume: {path} does not exist (drop --resume to start one)")
    if not resume and path is not None and not Path(path).exists():
        return False   # no study there; the file is made by open_study, after the data loaded (none left if not)
    storage = storage or make_storage(config.storage, heartbeat_interval=None)
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if config.study in names and not resume:
        raise StudyExistsError(f"study {config.study!r} already exists in {config.storage}: pass --resume to "
                               f"continue it, or --study NAME for a new one")
    if resume and config.study not in names:
        known = ", ".join(study_names(storage)) or "none"   # not a pareto search's companion (<study>.fidelity)
        raise NotFoundError(f"no study {config.study!r} to resume in {config.storage} (studies there: {known}); "
                          f"drop --resume to start it")
    if resume:
        check_resumed(optuna.load_study(study_name=config.study, storage=storage), config)
    return config.study in names


def check_resumed(study: optuna.Study, config: SearchConfig, space_config: dict[str, Any] | None = None) -> None:
    """Refuses a --resume that would mix trials of another task, training settings or space."""
    directions = [d.name.lower() for d in study.directions]
    if directions != config.directions:
        raise StudyMismatchError(f"study {config.study!r} was made to {' and '.join(directions)} (another --task or "
                                 f"--objective), not to {' and '.join(config.directions)}")
    recorded = study.user_attrs.get(V.SETTINGS)
    if isinstance(recorded, dict):
        diff = settings_diff(with_legacy_settings(recorded), config.settings())
        if diff:
            raise StudyMismatchError(f"study {config.study!r} was trained with other settings: {describe_diff(diff)}; "
                                     f"resume with the study's settings, or --study NAME for a new search")
    space = study.user_attrs.get(V.SPACE)
    if space_config is not None and isinstance(space, dict) and space != space_config:
        diff = settings_diff(space, space_config, ignore=frozenset())
        raise StudyMismatchError(f"study {config.study!r} searched another space (model, dataset, layers or "
                                 f"--flops-ratio differ): {describe_diff(diff)}")


def open_study(config: SearchConfig, context: SearchContext, resume: bool = False,
               sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    """Creates the study (the baseline enqueued as its first trial, then with ``opening="known"`` the space's grouped
    forms of the replaced layer, known.opening) or, with `resume`, loads and checks it."""
    storage = make_storage(config.storage, heartbeat_interval=config.heartbeat, grace_period=config.grace_period)
    sampler = sampler or SynoSampler(context.space, seed=config.seed, exploration=config.exploration,
                                     reward=sampler_reward(config, context), flops_bins=config.flops_bins)
    space_config = context.space.config()
    if check_study(config, resume, storage):
        study = optuna.load_study(study_name=config.study, storage=storage, sampler=sampler,
                                  pruner=_study_pruner(config, context))
        check_resumed(study, config, space_config)
        _ensure_baseline(study)
        return study
    # no median pruning: most operators start below the baseline; Hyperband / successive halving compare the
    # operators with each other (FidelityPruning)
    study = optuna.create_study(study_name=config.study, storage=storage, sampler=sampler,
                                directions=config.directions, pruner=_study_pruner(config, context),
                                load_if_exists=True)
    if not study.trials:
        study.set_user_attr(V.SPACE, space_config)
        study.set_user_attr(V.SETTINGS, config.settings())
        speed = choose_speed_objective(config, context)   # measured, or planned (asked, or the target not here)
        record_speed_objective(study, speed)
        names = speed_objective_names(config.objective_name, config.objective == "pareto", speed.measured)
        with warnings.catch_warnings():  # "experimental" since Optuna 3.2: noise in every new search's output
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)  # the dashboard's and trials_dataframe's column name
        study.enqueue_trial({}, user_attrs={V.BASELINE: True})
        if config.opening == "known":  # at most --trials of them: none is left WAITING
            for label, op in known.opening(context.space)[:config.trials]:
                study.enqueue_trial({}, user_attrs={V.OPERATOR: op.to_json(), V.OPENING: label})
    return study


def _ensure_baseline(study: optuna.Study) -> None:
    """A resumed study whose baseline never finished (Ctrl-C during trial 0) trains it again: enqueued, so it runs
    before any new operator trial (only the opening's trials still waiting from the start go first)."""
    states = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
    if not any(t.user_attrs.get(V.BASELINE) for t in study.get_trials(deepcopy=False, states=states)):
        study.enqueue_trial({}, user_attrs={V.BASELINE: True})


def remaining_trials(study: optuna.Study, trials: int) -> int:
    """Trials this worker runs so that the study holds `trials` operator trials (finished, or running in other
    workers) beside the baseline. Trials of a dead worker are failed first (heartbeat); a failed trial that was
    retried does not count (its retry does)."""
    # Counted here rather than with optuna's MaxTrialsCallback: that one counts trials by state alone, so it
    # would count the baseline and the failed attempts that were retried, and not the trials other workers
    # are running now.
    from optuna.storages import fail_stale_trials

    if heartbeat_enabled(storage_of(study)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(study)
        fail_lost_in_creation(study)   # RUNNING without a heartbeat: a worker stopped inside study.ask()
    all_trials = study.get_trials(deepcopy=False)
    retried = {n for t in all_trials for n in retry_history(t.system_attrs)}
    # a trial stopped by Ctrl-C (or lost before it started) evaluated nothing: a --resume runs another instead
    unrun = (*STOP_REASONS.values(), LOST_IN_CREATION)
    ops = [t for t in all_trials if not t.user_attrs.get(V.BASELINE) and t.number not in retried
           and not (t.state == TrialState.FAIL and t.user_attrs.get(V.FAILURE) in unrun)]
    done_or_running = [t for t in ops if t.state.is_finished() or t.state == optuna.trial.TrialState.RUNNING]
    baseline_waiting = any(t.user_attrs.get(V.BASELINE) and t.state == optuna.trial.TrialState.WAITING
                           for t in all_trials)
    return max(0, trials - len(done_or_running)) + (1 if baseline_waiting else 0)
