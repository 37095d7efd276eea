"""The search: an Optuna study whose trials train a model with one synthesized operator each.

Trial 0 evaluates the baseline (the original layers); every other trial gets an operator from the SynoSampler,
trains the task with it substituted (SynoSubstitution), may be pruned by Optuna's Hyperband or successive
halving over epochs (FidelityPruning, syno_automl.search.fidelity), and is logged to MLflow as a child run of
the study's run. By default (``objective="pareto"``) the study has two objectives, the accuracy (or loss) and
the operator's planned cost ratio, and ``study.best_trials`` is the operators' Pareto front;
``objective="accuracy"`` keeps the single-objective study (see syno_automl.search.objectives). Two tasks:
``image`` (classification, maximize val_acc; the embedded digits demo) and ``lm`` (the GPT's QKV projections,
minimize val_loss under a step and time budget per trial; see ``syno_automl.lm_trial``). A trial whose operator fails to build or whose
loss becomes NaN is recorded as failed (reason in its run) and the search goes on.

Example:
    >>> result = run_search(SearchConfig(trials=3, epochs=1))   # doctest: +SKIP
    >>> [t.values for t in result.study.best_trials]               # doctest: +SKIP
"""
from __future__ import annotations

import logging
import math
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

import lightning as L
import optuna
import torch
from torch import nn

from syno_automl import vocabulary as V
from syno_automl.config import (TASK_DEFAULTS, TASKS, SearchConfig, StudyExistsError, StudyMismatchError,
                                describe_diff, settings_diff, with_legacy_settings)
from syno_automl.lightning import SynoSubstitution
from syno_automl.optuna import BASELINE_ATTR, HASH_ATTR, SynoSampler, suggest_operator
from syno_automl.placeholder import Substitution, substitute
from syno_automl.search.fidelity import make_pruner
from syno_automl.search.objectives import (baseline_trial, best_operator_trial, objective_name, operator_front,
                                           primary_value)
from syno_automl.search.pareto import ParetoReward
from syno_automl.search.reward import Reward
from syno_automl.search.storage import make_storage
from syno_automl.space import Operator, OperatorSpace
from syno_automl.tasks import task_of

__all__ = ["SearchConfig", "SearchContext", "SearchResult", "Objective", "StudyExistsError", "StudyMismatchError",
           "prepare", "check_study", "open_study", "remaining_trials", "run_search", "train_operator", "LAYERS",
           "TASKS", "objective_name", "best_operator_trial", "baseline_trial"]

LAYERS: dict[str, type] = {"conv2d": nn.Conv2d, "linear": nn.Linear}
RUN_ID_ATTR = V.RUN_ID
FAILURE_ATTR = V.FAILURE
INTERRUPTED = "interrupted by the user (Ctrl-C / SIGINT)"
_log = logging.getLogger(__name__)


@dataclass
class SearchContext:
    """What every trial shares: data, one example batch, how to build the model, the space."""

    config: SearchConfig
    datamodule: Any
    example: torch.Tensor
    num_classes: int
    in_channels: int
    substitute_options: dict[str, Any]
    space: OperatorSpace
    substitution: Substitution  # on a throw-away model: baseline FLOPs, mappings, skipped layers

    def build_model(self) -> nn.Module:
        from lightning_modules import build_model

        return build_model(self.config.model, self.num_classes, self.in_channels)

    def build_task(self, model: nn.Module) -> Any:
        return task_of(self.config).build_module(self.config, model, self.num_classes)


@dataclass
class SearchResult:
    study: optuna.Study
    context: SearchContext
    parent_run_id: str | None
    seconds: float
    final: Any = None  # the final stage's FinalResult (search/verdict.py), None when off


def _seed_everything(seed: int) -> None:
    # Lightning's seeding (random, numpy, torch, PL_GLOBAL_SEED); it accepts only 0..2**32-1, so any
    # --seed (negative, or seed + trial number past the top) is folded into that range first
    L.seed_everything(seed % (1 << 32), workers=False, verbose=False)


def prepare(config: SearchConfig) -> SearchContext:
    """Loads the data and builds the operator space from one real forward pass of the model."""
    from lightning_modules import build_datamodule

    config.validate()
    embedded = config.data_dir is None and config.dataset in ("digits", "text")
    threads = config.threads or (1 if embedded else None)
    if threads:  # tiny models: more threads only contend (50x slower with 2 threads on a busy 2-core VM)
        torch.set_num_threads(threads)
    task = task_of(config)
    kwargs: dict[str, Any] = {"batch_size": config.batch_size, **task.datamodule_kwargs(config)}
    datamodule = build_datamodule(config.dataset, config.data_dir, **kwargs)
    datamodule.setup("fit")
    # the example batch sizes the layers and sets every operator's initial scale (match_output_scale): seeded,
    # so that it is the same batch in every process (the shuffling loader draws from the global RNG)
    _seed_everything(config.seed)
    batch = next(iter(datamodule.train_dataloader()))
    example = batch[0] if isinstance(batch, (tuple, list)) else batch
    num_classes, in_channels = task.sizes(datamodule)
    layer = LAYERS[config.layer]
    options: dict[str, Any] = {"max_depth": config.max_depth, "flops_ratio": config.flops_ratio,
                               "seed": config.seed}
    if config.cost_ratio is not None:
        options["cost_ratio"] = config.cost_ratio
    if config.where is not None:
        options["where"] = config.where
    elif layer is nn.Conv2d:  # keep the stem (it reads the image channels), as the original did
        options["where"] = lambda name, m: m.in_channels != in_channels
    from lightning_modules import build_model

    _seed_everything(config.seed)
    probe = build_model(config.model, num_classes, in_channels)
    task.check_model(config, probe)
    sub = substitute(probe, layer, example, **options)
    return SearchContext(config, datamodule, example, num_classes, in_channels, options, sub.space, sub)


def _reward(config: SearchConfig, context: SearchContext) -> Reward | ParetoReward:
    reward = task_of(config).reward(config, context.num_classes)
    # pareto: accuracy is credited only at a speedup over the replaced layers (syno_automl.search.pareto)
    return ParetoReward(reward, speedup=config.reward_speedup) if config.objective == "pareto" else reward


def _study_pruner(config: SearchConfig) -> optuna.pruners.BasePruner:
    """The search study's own pruner: an accuracy study prunes through it; a pareto study cannot (Optuna's
    pruners are single-objective): its trials report to the companion study instead (search.fidelity)."""
    if config.objective == "pareto" or not task_of(config).prunes_in_study:
        return optuna.pruners.NopPruner()
    return make_pruner(config.pruner, config.epochs)


def check_study(config: SearchConfig, resume: bool, storage: optuna.storages.BaseStorage | None = None) -> bool:
    """Whether the study exists. Raises StudyExistsError when it does and `resume` is False; with `resume`,
    LookupError when it does not, StudyMismatchError when it was made for another task or training settings."""
    path = config.storage[len("sqlite:///"):] if config.storage.startswith("sqlite:///") else None
    if resume and path is not None and not Path(path).exists():  # never create a database to resume
        raise LookupError(f"no study {config.study!r} to resume: {path} does not exist (drop --resume to start one)")
    storage = storage or make_storage(config.storage, heartbeat_interval=None)
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    if config.study in names and not resume:
        raise StudyExistsError(f"study {config.study!r} already exists in {config.storage}: pass --resume to "
                               f"continue it, or --study NAME for a new one")
    if resume and config.study not in names:
        known = ", ".join(sorted(names)) or "none"
        raise LookupError(f"no study {config.study!r} to resume in {config.storage} (studies there: {known}); "
                          f"drop --resume to start it")
    if resume:
        _check_resumed(optuna.load_study(study_name=config.study, storage=storage), config)
    return config.study in names


def _check_resumed(study: optuna.Study, config: SearchConfig, space_config: dict[str, Any] | None = None) -> None:
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
    """Creates the study (baseline enqueued as its first trial) or, with `resume`, loads and checks it."""
    storage = make_storage(config.storage, heartbeat_interval=config.heartbeat, grace_period=config.grace_period)
    sampler = sampler or SynoSampler(context.space, seed=config.seed, exploration=config.exploration,
                                     reward=_reward(config, context))
    space_config = context.space.config()
    if check_study(config, resume, storage):
        study = optuna.load_study(study_name=config.study, storage=storage, sampler=sampler,
                                  pruner=_study_pruner(config))
        _check_resumed(study, config, space_config)
        return study
    # no median pruning: most operators start below the baseline; Hyperband / successive halving compare the
    # operators with each other (FidelityPruning)
    study = optuna.create_study(study_name=config.study, storage=storage, sampler=sampler,
                                directions=config.directions, pruner=_study_pruner(config), load_if_exists=True)
    if not study.trials:
        study.set_user_attr(V.SPACE, space_config)
        study.set_user_attr(V.SETTINGS, config.settings())
        with warnings.catch_warnings():  # "experimental" since Optuna 3.2: noise in every new search's output
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(config.objective_names)  # the dashboard's and trials_dataframe's column name
        study.enqueue_trial({}, user_attrs={BASELINE_ATTR: True})
    return study


def _failure_reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    cause = error.__cause__
    if cause is not None and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {cause})"
    return text


class Objective:
    """Trains one trial: baseline or operator; returns the final validation accuracy (image) or loss (lm), and
    (pareto) the operator's planned cost ratio (the baseline's: 1.0).

    Example:
        >>> context = prepare(SearchConfig())                                   # doctest: +SKIP
        >>> open_study(SearchConfig(), context).optimize(Objective(context), 2)  # doctest: +SKIP
    """

    def __init__(self, context: SearchContext, tracker: Any | None = None, parent_run_id: str | None = None,
                 out: TextIO | None = sys.stdout) -> None:
        self.context = context
        self.config = context.config
        self.tracker = tracker
        self.parent_run_id = parent_run_id
        self.out = out

    def __call__(self, trial: optuna.trial.Trial) -> float | tuple[float, float]:
        config, context = self.config, self.context
        baseline = bool(trial.user_attrs.get(BASELINE_ATTR))
        run = None
        op: Operator | None = None
        started = time.time()
        self._close_lost_run(trial)
        system = trial.storage.get_trial_system_attrs(trial._trial_id)
        if baseline and f"constraints:{V.BASELINE_CONSTRAINT}" not in system:  # (a retried baseline has it)
            # the reference, not a candidate: infeasible, so study.best_trial is the best operator
            trial.set_constraint(V.BASELINE_CONSTRAINT, 1.0)
        try:
            try:
                if not baseline:
                    op = suggest_operator(trial)
            finally:  # a run even for a trial whose operator could not be given (reason recorded below)
                if self.tracker is not None:
                    run = self.tracker.trial_run(self.parent_run_id, config.study, trial.number, op,
                                                 settings=_trial_run_settings(config), tags={"optuna.study": config.study},
                                                 label=None if op is not None or baseline else "no-operator")
                    trial.set_user_attr(RUN_ID_ATTR, run.run_id)
            value = train_operator(context, trial, run, epochs=config.epochs)
            cost = 1.0 if baseline else trial.user_attrs.get(V.COST_RATIO)
            if config.objective == "pareto" and (cost is None or not math.isfinite(float(cost))):
                raise ValueError(f"no finite planned cost ratio ({V.COST_RATIO}={cost}): not comparable")
            if baseline and run is not None:
                _log_baseline(run, context)
            extra = task_of(config).trial_line(trial, run, baseline)
            if op is not None and config.latency_targets:
                extra += self._latency(trial, run, op, value)
        except KeyboardInterrupt:  # Ctrl-C: this trial fails now (Optuna marks it FAIL and re-raises)
            trial.set_user_attr(FAILURE_ATTR, INTERRUPTED)
            if run is not None:
                run.log_failure(INTERRUPTED)
                run.finish("KILLED")
            self._print(trial, op, "interrupted", started)
            raise
        except optuna.TrialPruned as e:
            trial.set_user_attr(V.PRUNED, str(e)[:1000])
            if run is not None:
                run.set_tags({V.TAG_PRUNED: str(e)})
                run.finish("KILLED")
            self._print(trial, op, f"pruned ({e})", started)
            raise
        except Exception as e:
            reason = _failure_reason(e)
            trial.set_user_attr(FAILURE_ATTR, reason[:1000])
            if run is not None:
                run.log_failure(reason, traceback.format_exc())
                run.finish("FAILED")
            self._print(trial, op, f"failed: {reason[:160]}", started)
            raise
        if run is not None:
            run.finish("FINISHED")
        ratio = trial.user_attrs.get(V.FLOPS_RATIO)
        self._print(trial, op, f"{config.objective_name} {value:.4f}"
                    + (f"  flops {ratio:.3f}x" if ratio is not None else "")
                    + (f"  cost {cost:.3f}x" if cost is not None and not baseline else "") + extra, started)
        return (value, float(cost)) if config.objective == "pareto" else value

    def _latency(self, trial: optuna.trial.Trial, run: Any | None, op: Operator, value: float) -> str:
        """TVM latency of the operator in every replaced layer vs those layers, when the trial is within the
        margin of the baseline. Never fails the trial: a missing latency is recorded with its reason."""
        config = self.config
        base = baseline_trial(trial.study)
        if config.latency_margin is not None:
            base_value = primary_value(base) if base is not None else None
            if base_value is None:
                return "  latency: skipped (no baseline value yet)"
            within = (value <= base_value + config.latency_margin if config.direction == "minimize"
                      else value >= base_value - config.latency_margin)
            if not within:
                return ""
        try:
            from syno_automl import measure

            # at inference sizes: batch 1 (image) or one sequence (lm), as the paper's latency figures
            sizes = task_of(config).latency_sizes(config)
            out = self.out
            progress = (None if out is None or config.latency_trials <= 0 else
                        lambda line: print(f"  [trial {trial.number}] tuning {line}", file=out, flush=True))
            result = measure.measure_layers(op, targets=config.latency_targets, trials=config.latency_trials,
                                            inductor=config.latency_inductor, seed=config.seed, sizes=sizes,
                                            protocol=measure.PROTOCOL, progress=progress)
        except Exception as e:  # noqa: BLE001 -- TVM missing or broken: the trial keeps its value
            reason = f"{type(e).__name__}: {e}"[:300]
            trial.set_user_attr("syno.latency_failure", reason)
            if run is not None:
                run.set_tags({"syno.latency_failure": reason})
            return f"  latency: missing ({reason[:80]})"
        entries = {dev: measure.stored_entry(d) for dev, d in result["devices"].items()}
        trial.set_user_attr("syno.latency", entries)
        if run is not None:
            from syno_automl.tracking import log_latency

            log_latency(run, result)
        self._log_baseline_latency(base, result)
        # every speedup says how both sides were scheduled: "(untuned)", "(tuned 64 trials)", "(eager)"
        parts = [f"{dev} {e['speedup']:.2f}x ({e.get('tag')})" if e["speedup"] is not None else f"{dev} missing"
                 for dev, e in entries.items()]
        return "  speedup " + ", ".join(parts)

    def _log_baseline_latency(self, base: optuna.trial.FrozenTrial | None, result: dict[str, Any]) -> None:
        """The baseline trial's run gets the replaced layers' latency as its own ``latency_ms.<device>`` (speedup
        1), once per device, so that MLflow's compare view shows the baseline beside the operators."""
        run_id = base.user_attrs.get(RUN_ID_ATTR) if base is not None else None
        if self.tracker is None or run_id is None:
            return
        from syno_automl.tracking import log_latency

        run = self.tracker.run(run_id)
        try:
            have = set(run.client.get_run(run_id).data.metrics)
        except Exception:  # noqa: BLE001 -- logging never stops a search
            return
        todo = {dev: s for dev, s in result["devices"].items()
                if s.get("baseline_ms") is not None and V.latency_metric(dev) not in have}
        if todo:
            log_latency(run, {"devices": todo}, role="baseline")

    def _close_lost_run(self, trial: optuna.trial.Trial) -> None:
        """A retried trial: its lost predecessor's run (worker killed mid-trial) is marked FAILED."""
        lost = trial.storage.get_trial_system_attrs(trial._trial_id).get("failed_trial")
        if self.tracker is None or lost is None:
            return
        history = trial.storage.get_trial_system_attrs(trial._trial_id).get("retry_history", [lost])
        previous = history[-1] if history else lost
        found = self.tracker.find_trial_run(self.config.study, number=previous)
        if found is not None and found.info.status == "RUNNING":
            run = self.tracker.run(found.info.run_id)
            run.log_failure(f"worker lost mid-trial (heartbeat stale); retried as trial {trial.number}")
            run.finish("FAILED")

    def _print(self, trial: optuna.trial.Trial, op: Operator | None, what: str, started: float) -> None:
        if self.out is None:
            return
        label = "baseline        " if op is None else op.hash
        done = len(trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                                    optuna.trial.TrialState.PRUNED,
                                                                    optuna.trial.TrialState.FAIL)))
        print(f"[{done + 1:>3}] trial {trial.number:<3} {label}  {what}  ({time.time() - started:.1f} s)",
              file=self.out, flush=True)


def train_operator(context: SearchContext, trial: optuna.trial.Trial | None, run: Any | None, *,
                   epochs: int, operator: Operator | None = None, milestones: dict[int, float] | None = None,
                   timeout: float | None = -1.0, steps: int | None = None) -> float:
    """Trains the task with the trial's (or `operator`'s) operator substituted; returns the last val_acc (image)
    or val_loss (lm).

    Logs per-epoch (image) or per-step (lm) metrics and FLOPs/params/flops_ratio to `run` when given.
    image: `epochs`; `timeout`: -1 for the config's trial_timeout, None or 0 for no limit (over it: failed).
    lm: `steps` (default the config's max_steps); `timeout`: -1 for the config's time_budget, None or 0 for
    none (at the budget training stops and the model is validated). Raises optuna.TrialPruned when the pruner
    (config.pruner, FidelityPruning) or a milestone says so, OperatorBuildError/BudgetExceededError,
    NonFiniteLossError, TrainingTooSlowError.
    """
    config = context.config
    _seed_everything(config.seed + (trial.number if trial is not None else 0))
    substitution = SynoSubstitution(operator if operator is not None else trial, LAYERS[config.layer],
                                    example_input=context.example,
                                    flops_ratio=None if operator is not None else config.flops_ratio,
                                    **{k: v for k, v in context.substitute_options.items()
                                       if k not in ("flops_ratio", "cost_ratio")})
    value = task_of(config).train(context, trial, run, substitution, epochs=epochs, milestones=milestones,
                                  timeout=timeout, steps=steps)
    _log_weights(run, substitution)
    return value


def _trial_run_settings(config: SearchConfig) -> dict[str, Any]:
    """What a trial run repeats of the search settings (all of them are on the study's parent run)."""
    from syno_automl.tracking import TRIAL_RUN_SETTINGS

    settings = config.settings()
    return {k: settings[k] for k in TRIAL_RUN_SETTINGS if k in settings}


def _log_baseline(run: Any, context: SearchContext) -> None:
    """The baseline run's artifact: the replaced layers (so comparing runs in MLflow keeps artifact columns)."""
    sub = context.substitution
    run.log_json({"replaced_layers": [{"name": name, "kind": ph.kind, "layer": repr(ph.referred_layer),
                                       "mapping": sub.space.mapping(i)} for i, (name, ph) in enumerate(sub.placeholders)],
                  "baseline_flops": sub.baseline_flops, "space": str(sub.space.input_shape) + " -> "
                  + str(sub.space.output_shape)}, V.ARTIFACT_BASELINE)


def _log_weights(run: Any | None, substitution: SynoSubstitution) -> None:
    """The trained operator weights (and added biases) of every replaced layer: the run's ``weights.pt``, read
    by ``syno-automl export --weights`` (keys as in the exported SynoLayer's state_dict)."""
    sub = substitution.substitution
    if run is None or sub is None or substitution.operator is None:
        return
    layers = [{"name": name, "kind": ph.kind, "mapping": sub.space.mapping(i), "bias": ph.bias is not None,
               "state": {k: v.detach().cpu().clone() for k, v in ph.state_dict().items()}}
              for i, (name, ph) in enumerate(sub.placeholders)]
    run.log_torch({"operator": substitution.operator.hash, "layers": layers}, V.ARTIFACT_WEIGHTS)


def run_search(config: SearchConfig, resume: bool = False, out: TextIO | None = sys.stdout,
               n_trials: int | None = None) -> SearchResult:
    """Runs (or continues) the search until the study holds `config.trials` finished operator trials."""
    started = time.time()
    config.validate()
    check_study(config, resume)  # before loading data: a wrong invocation fails at once
    context = prepare(config)
    study = open_study(config, context, resume=resume)
    tracker = parent = None
    if config.tracking_uri:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(config.tracking_uri)
        parent = tracker.study_run(config.study, config.settings())
        study.set_user_attr(RUN_ID_ATTR, parent)
    if n_trials is None:
        n_trials = remaining_trials(study, config.trials)
    if out is not None:
        print(f"syno-automl: study {config.study!r} in {config.storage}: {n_trials} trials to run "
              f"({config.model} on {config.dataset}, {len(context.substitution.placeholders)} layers substituted, "
              f"FLOPs budget {config.flops_ratio}x of {context.substitution.baseline_flops / 1e6:.1f} MFLOPs"
              + (f", cost budget {config.cost_ratio}x" if config.cost_ratio else "") + ")",
              file=out, flush=True)
    # our own progress lines report failures in one line; Optuna would add a traceback per failed trial
    optuna.logging.set_verbosity(optuna.logging.ERROR if out is not None else optuna.logging.WARNING)
    objective = Objective(context, tracker, parent, out)
    status, final = "FAILED", None
    try:
        study.optimize(objective, n_trials=n_trials, catch=(Exception,), gc_after_trial=True)
        from syno_automl.search.finalists import run_final_stage

        final = run_final_stage(study, context, tracker, parent, out)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if tracker is not None and parent is not None:
            _summarize_parent(tracker, parent, study)
            tracker.run(parent).finish(status)
    return SearchResult(study, context, parent, time.time() - started, final)


def remaining_trials(study: optuna.Study, trials: int) -> int:
    """Trials this worker runs so that the study holds `trials` operator trials (finished, or running in other
    workers) beside the baseline. Trials of a dead worker are failed first (heartbeat); a failed trial that was
    retried does not count (its retry does)."""
    # Counted here rather than with optuna's MaxTrialsCallback: that one counts trials by state alone, so it
    # would count the baseline and the failed attempts that were retried, and not the trials other workers
    # are running now.
    from optuna.storages import fail_stale_trials
    from optuna.storages._heartbeat import is_heartbeat_enabled

    if is_heartbeat_enabled(study._storage):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(study)
    all_trials = study.get_trials(deepcopy=False)
    retried = {n for t in all_trials for n in t.system_attrs.get("retry_history", ())}
    ops = [t for t in all_trials if not t.user_attrs.get(BASELINE_ATTR) and t.number not in retried]
    done_or_running = [t for t in ops if t.state.is_finished() or t.state == optuna.trial.TrialState.RUNNING]
    baseline_waiting = any(t.user_attrs.get(BASELINE_ATTR) and t.state == optuna.trial.TrialState.WAITING
                           for t in all_trials)
    return max(0, trials - len(done_or_running)) + (1 if baseline_waiting else 0)


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
        run.set_tags({V.TAG_BEST_HASH: best.user_attrs.get(HASH_ATTR)})
    if len(study.directions) > 1:
        metrics["front_size"] = len(operator_front(study))
    run.log_metrics(metrics)
