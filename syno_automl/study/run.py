"""The search: an Optuna study whose trials train a model with one synthesized operator each.

Trial 0 evaluates the baseline (the original layers); every other trial gets an operator from the SynoSampler,
trains the task with it substituted (SynoSubstitution), may be pruned by Optuna's Hyperband or successive
halving over epochs (FidelityPruning, syno_automl.search.fidelity), and is logged to MLflow as a child run of
the study's run. By default (``objective="pareto"``) the study has two objectives, the accuracy (or loss) and
the operator's planned cost ratio, and ``study.best_trials`` is the operators' Pareto front;
``objective="accuracy"`` keeps the single-objective study (see syno_automl.search.objectives). Two tasks:
``image`` (classification, maximize val_acc; the embedded digits demo) and ``lm`` (the GPT's QKV projections,
minimize val_loss under a step and time budget per trial; see ``syno_automl.tasks.lm_training``), objects the search
dispatches to (syno_automl.tasks). A trial whose operator fails to build or whose loss becomes NaN is recorded as
failed (reason in its run) and the search goes on.


Example:
    >>> result = run_search(SearchConfig(trials=3, epochs=1))   # doctest: +SKIP
    >>> [t.values for t in result.study.best_trials]               # doctest: +SKIP
"""
from __future__ import annotations

import gc
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, TextIO

import optuna

from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig
from syno_automl.errors import SynoError
from syno_automl.interrupt import check_interrupt, deferred_interrupt, interrupt_requested, stop_on_signals, stop_reason
from syno_automl.optuna_private import storage_of
from syno_automl.runtime.process import configure_process
from syno_automl.search.objectives import (
    baseline_trial,
    best_operator_trial,
    objective_name,
    operator_front,
    primary_value,
)
from syno_automl.search.prefetch import stop_prefetches
from syno_automl.study.context import SearchContext, prepare, process_threads
from syno_automl.study.lost_trials import (
    TrialsCreated,
    end_final_runs,
    end_orphan_trial_runs,
    end_trial_run,
    fail_unstarted,
)
from syno_automl.study.opening import check_study, open_study, remaining_trials
from syno_automl.study.requeue import requeue_interrupted
from syno_automl.study.trial import Objective
from syno_automl.study.trial_speed import announce_speed_objective
from syno_automl.words import counted

__all__ = ["SearchResult", "run_search", "SearchFailedError", "failure_of", "check_space_holds_operators"]


class SearchFailedError(SynoError, RuntimeError):
    """The search produced nothing to compare: its baseline failed, or every operator trial did."""


@dataclass
class SearchResult:
    study: optuna.Study
    context: SearchContext
    parent_run_id: str | None
    seconds: float
    final: Any = None  # the final stage's FinalResult (study/verdict.py), None when off


def run_search(config: SearchConfig, resume: bool = False, out: TextIO | None = sys.stdout,
               n_trials: int | None = None) -> SearchResult:
    """Runs (or continues) the search until the study holds `config.trials` finished operator trials. Ctrl-C or
    SIGTERM stops it (KeyboardInterrupt) with nothing left RUNNING: the trial it was in fails, its run and the
    study's run are KILLED (syno_automl.interrupt.stop_on_signals, whose checkpoints raise again an interrupt a
    finalizer swallowed). An entry point: it sets its process up (syno_automl.runtime.process: torch's threads, the
    steady allocator, the heap frozen once the study is open)."""
    with stop_on_signals():
        return _run_search(config, resume, out, n_trials)


def _run_search(config: SearchConfig, resume: bool, out: TextIO | None, n_trials: int | None) -> SearchResult:
    started = time.time()
    config.validate()
    check_study(config, resume)  # before loading data: a wrong invocation fails at once
    # an entry point: the process is the search's
    configure_process(threads=process_threads(config), timing=config.timing)
    context = prepare(config)
    check_space_holds_operators(context.space, config)  # before any study, run or training: nothing to lose
    study = open_study(config, context, resume=resume)
    configure_process(freeze_heap=True)   # what the open study holds leaves the collector's full passes
    announce_speed_objective(study, out)   # planned where measured was asked: said; a --resume it cannot run: refused
    tracker = parent = None
    created = TrialsCreated(study)   # the trials this worker makes RUNNING: an interrupt fails those left so
    status, final = "FAILED", None
    try:
        if config.tracking_uri:
            from syno_automl.tracking import SearchTracker

            tracker = SearchTracker(config.tracking_uri)
            with deferred_interrupt():   # the study's run exists and `parent` holds its id, or neither
                parent = tracker.study_run(config.study, config.settings())
            study.set_user_attr(V.STUDY_RUN_ID, parent)
            end_orphan_trial_runs(study, tracker, config.study)   # left RUNNING by a worker that was stopped
        final = _optimize(config, context, study, Objective(context, tracker, parent, out), tracker, parent, out,
                          n_trials)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        _end_interrupted(study, created, tracker, config.study, started)
        raise
    except Exception as e:
        if interrupt_requested() is None:
            raise
        # an interrupt that surfaced as another error (a KeyboardInterrupt inside Optuna's tell ends in its
        # UnboundLocalError): the search was stopped, not broken
        status = "KILLED"
        _end_interrupted(study, created, tracker, config.study, started)
        raise KeyboardInterrupt(f"interrupted ({type(e).__name__} on the way out)") from e
    finally:
        created.stop()
        if tracker is not None and parent is not None:
            with deferred_interrupt():   # the study's run is ended even when a signal arrives meanwhile
                _summarize_parent(tracker, parent, study)
                tracker.run(parent).finish("KILLED" if interrupt_requested() is not None else status)
    return SearchResult(study, context, parent, time.time() - started, final)


def _optimize(config: SearchConfig, context: SearchContext, study: optuna.Study, objective: Objective, tracker: Any,
              parent: str | None, out: TextIO | None, n_trials: int | None) -> Any:
    """The trials, then the final stage; returns the final stage's result."""
    if n_trials is None:
        n_trials = remaining_trials(study, config.trials)
    if out is not None:
        print(f"syno-automl: study {config.study!r} in {config.storage}: {counted(n_trials, 'trials')} to run "
              f"({config.model} on {config.dataset}, {len(context.substitution.placeholders)} layers substituted, "
              f"FLOPs budget {config.flops_ratio}x of {context.substitution.baseline_flops / 1e6:.1f} MFLOPs"
              + (f", cost budget {config.cost_ratio}x" if config.cost_ratio else "") + ")",
              file=out, flush=True)
    # our own progress lines report failures in one line; Optuna would add a traceback per failed trial
    optuna.logging.set_verbosity(optuna.logging.ERROR if out is not None else optuna.logging.WARNING)
    study.optimize(objective, n_trials=n_trials, catch=(Exception,), callbacks=[_after_trial])
    stop_prefetches()   # the sampler's look-ahead for a next trial that will not come: no CPU taken from the timing
    check_interrupt()
    from syno_automl.study.finalists import run_final_stage

    final = run_final_stage(study, context, tracker, parent, out)
    check_interrupt()
    return final


def _after_trial(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Optuna's ``gc_after_trial`` collection (it keeps a long search's memory flat), then a checkpoint: a Ctrl-C
    that a finalizer swallowed during the collection (Lightning's Profiler.__del__) stops the search here. Not run
    when the trial was interrupted: an interrupted search exits without it (a second or more on a loaded machine)."""
    gc.collect()
    check_interrupt()


def _end_interrupted(study: optuna.Study, created: TrialsCreated, tracker: Any | None, study_name: str,
                     started: float) -> None:
    """This worker's trials left RUNNING by the interrupt fail (stop_reason()), their MLflow runs are KILLED: the
    trial being created (stopped inside study.ask(), which Optuna never ends), the one being run when Optuna could
    not end it (a signal in its tell), a final-stage run made since `started` and not yet training; a retry of each
    interrupted operator is queued (study/requeue.py). Best effort: the interrupt is what the caller sees."""
    reason = stop_reason()
    ids = {getattr(study.sampler, "current_trial_id", None), *created.ids[-3:]} - {None}   # the latest: sequential
    numbers = set()
    for trial_id in [*ids, *created.others[-2:]]:   # and the fidelity companion's trial (search/fidelity.py)
        try:
            fail_unstarted(study, trial_id, reason)
            if trial_id in ids:
                numbers.add(storage_of(study).get_trial(trial_id).number)
        except Exception:  # noqa: BLE001 -- a --resume fails what is left (heartbeats, lost_trials)
            pass
    requeue_interrupted(study, ids)   # their operators, tried again first by the next worker (a --resume)
    if tracker is not None:
        for number in sorted(numbers):
            end_trial_run(tracker, study_name, number, reason)
        end_final_runs(tracker, study_name, started, reason)


#: how hard the pre-flight looks for one operator: twice one MCTS fallback draw (1,000 descents), a few seconds
#: in a nearly empty space; bounded by descents, not time, so that the verdict does not depend on the machine's
#: speed or load (the time limit is only a safety net)
PREFLIGHT_ATTEMPTS = 2_000
PREFLIGHT_SECONDS = 600.0


def check_space_holds_operators(space: Any, config: SearchConfig) -> None:
    """Raises EmptySpaceError, naming the budget, when the space holds no operator the search could propose: a
    budget the core's bounds prove impossible, or (a cost budget) none found in PREFLIGHT_ATTEMPTS descents.
    Otherwise the baseline would train first and every operator trial then fail with the same reason."""
    import warnings

    from syno_automl.errors import EmptySpaceError, NothingSampledWarning

    settings = "the search's settings: --flops-ratio, --cost-ratio (0: off), --cost-profile, --max-depth"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NothingSampledWarning)
            found = space.sample(1, seed=config.seed, max_attempts=PREFLIGHT_ATTEMPTS,
                                 time_limit=PREFLIGHT_SECONDS)
    except EmptySpaceError as e:
        raise EmptySpaceError(f"{e} ({settings})") from e
    if not found:
        report = space.last_report
        raise EmptySpaceError(
            f"the search space holds no operator within its budgets ({space.budgets}): none found in "
            f"{report.attempts} descents ({report.seconds:.0f} s); raise them ({settings})")


def _summarize_parent(tracker: Any, parent: str, study: optuna.Study) -> None:
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    run = tracker.run(parent)
    name = objective_name(study)
    metrics: dict[str, float] = {"trials": len(trials), "completed": len(done),
                                 "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in trials)}
    base = baseline_trial(study)
    if base is not None and primary_value(base) is not None:
        metrics[f"baseline_{name}"] = primary_value(base)  # type: ignore[assignment]
    best = best_operator_trial(study)
    if best is not None and primary_value(best) is not None:
        metrics[f"best_{name}"] = primary_value(best)  # type: ignore[assignment]
        if best.user_attrs.get(V.COST_RATIO) is not None:
            metrics["best_cost_ratio"] = float(best.user_attrs[V.COST_RATIO])
        run.set_tags({V.TAG_BEST_HASH: best.user_attrs.get(V.HASH)})
    if len(study.directions) > 1:
        metrics["front_size"] = len(operator_front(study))
    run.log_metrics(metrics)


def failure_of(study: optuna.Study) -> str | None:
    """Why the search produced nothing to compare, or None: the baseline did not finish, or every operator trial
    that ended failed (none completed or was pruned); the most frequent failure reason is named."""
    trials = study.get_trials(deepcopy=False)
    ended = [t for t in trials if t.state.is_finished()]
    base = [t for t in ended if t.user_attrs.get(V.BASELINE)]
    ops = [t for t in ended if not t.user_attrs.get(V.BASELINE)]

    def reason(group: list[optuna.trial.FrozenTrial]) -> str:
        reasons = Counter(str(t.user_attrs.get(V.FAILURE, "no reason recorded")) for t in group)
        text, count = reasons.most_common(1)[0]
        return f"{text}" + (f" ({count} of {len(group)})" if len(group) > 1 else "")

    if base and not any(t.state == optuna.trial.TrialState.COMPLETE for t in base):
        return f"the baseline trial failed: {reason([t for t in base if t.state == optuna.trial.TrialState.FAIL])}"
    op_failed = [t for t in ops if t.state == optuna.trial.TrialState.FAIL]
    if ops and len(op_failed) == len(ops):
        return f"every operator trial failed: {reason(op_failed)}"
    return None
