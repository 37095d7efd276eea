"""The final stage of a search: re-train the finalists and the baseline alike, time the whole models, judge.

After the search's trials, up to ``config.finalists`` operator trials are chosen (:func:`choose_finalists`:
completed, not the baseline, faster than the original in the trial by the study's speed objective -- the measured
time ratio, or the planned cost ratio, below 1 (settings.FINALIST_RULE states it for the docs and --help); the
Pareto front ``study.best_trials`` first in a multi-objective study, then by the trial's value -- accuracy under
``config.lr_schedule``, or loss for the lm task --, and up to twice as many when further ones are within a seed's
noise, :data:`TIE_MARGIN`, of a chosen one's value). One whose trial value is more than :data:`FAR_OUTSIDE` ×
``config.final_margin`` behind the baseline trial's is left out (:func:`far_outside`; the table says why). Each of
the others and the baseline is re-trained with the search's own training path
(:func:`syno_automl.study.training.train_operator`) with ``config.final_seeds`` training seeds (the same seeds
for every model: a paired comparison), so that "within 1 pp" is a statement about the operator rather than one
seed's noise, for :func:`final_budget`:

- image: ``config.final_epochs`` epochs (default twice the search's ``epochs``);
- lm: ``config.final_steps`` optimizer steps (default twice the search's ``max_steps``) and no time budget: every
  model trains the same steps (a time cut would train a slower model less, and would make the figures depend on
  the machine's load rather than on the seed).

The whole substituted model and the original one are then timed by the speed protocol
(:func:`syno_automl.speed.probe.measure_speedups`: inference in eval mode on the context's ``timing_example`` --
the search's example batch, or for the lm task the first validation batch of tokens --, each operator against
the original in interleaved blocks, a ratio with its 95 % interval; a control, the original against itself, shows
the protocol's own noise; lm: tokens/s, the baseline's the batch's tokens over its median latency, an operator's
the baseline's times its speedup, so that the speedup is the ratio of tokens/s), in two sessions -- fresh
processes -- pooled, so
that the interval holds what changes from one process to the next (:mod:`syno_automl.speed.sessions`). The
:class:`~syno_automl.study.verdict.FinalResult` names the fastest operator within ``config.final_margin`` of the
baseline (image: accuracy lost, absolute; lm: val_loss gained, absolute nats) whose speedup's interval lies above
1, operators tied with it in value and speed named by a stated rule (fewer FLOPs, then parameters, then hash); or
it says none is.

Logged: one MLflow run per re-trained model (tag ``syno.role`` = ``final``, child of the study's run), the
verdict and figures on the study's run, the table as the study's user attribute ``syno.final``.

Example:
    >>> result = run_final_stage(study, context, tracker, parent_run_id)   # doctest: +SKIP
    >>> print(result.verdict())                                            # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, TextIO

import optuna
from optuna.trial import TrialState

from syno_automl import vocabulary as V
from syno_automl.interrupt import check_interrupt, stop_reason
from syno_automl.runtime import SpeedTarget
from syno_automl.search.objectives import (
    TIME_RATIO,
    baseline_trial,
    is_pareto,
    maximizes,
    operator_front,
    primary_value,
    speed_ratio_name,
    speed_ratio_of,
)
from syno_automl.speed.probe import SpeedMeasurement, measure_speedups
from syno_automl.speed.sessions import measure_final
from syno_automl.study.verdict import NO_CHEAPER_OPERATOR, Finalist, FinalResult, describe_kind, no_faster_operator
from syno_automl.words import counted

if TYPE_CHECKING:
    from syno_automl.study.context import SearchContext

__all__ = ["choose_finalists", "far_outside", "retrain", "measure_speedups", "run_final_stage", "measured_targets",
           "TIE_MARGIN", "FAR_OUTSIDE"]

# finalists: a trial value (accuracy) this close to a chosen one's is within one seed's noise of it, so that operator
# is re-trained too (up to 2x --finalists). Measured on the default task (one-cycle, 3 epochs, 20 operators x seeds
# 0-2, bench/density.py --trial-seeds 3): sd of a trial's val_acc over seeds median 0.0043, pooled 0.0067; the sd
# of the difference of two such values is sqrt(2) x 0.0067 = 0.0095, about this margin
TIE_MARGIN = 0.01

#: a finalist whose trial value is worse than the baseline's trial value by more than this many --final-margin is
#: not re-trained (:func:`far_outside`): a trial's value is one seed's of a shorter training, but ranks operators as
#: the final stage does (docs/search.md, "The trial's signal": one seed's noise is about TIE_MARGIN), so one that
#: far behind cannot come within the margin, and its re-training is time spent for nothing (on MNIST-1D a finalist
#: 47 pp behind took 18 s of a 98 s stage)
FAR_OUTSIDE = 5


def choose_finalists(study: optuna.Study, k: int, tie: float | None = None,
                     most: int | None = None) -> list[optuna.trial.FrozenTrial]:
    """Up to `k` completed operator trials faster than the replaced layers (a pareto study's speed ratio < 1: the
    measured time ratio, or the planned cost ratio; an accuracy study's user attr ``syno.cost_ratio`` < 1),
    one per operator: the Pareto front first (a multi-objective study), then the rest, each by its first value
    (the trial's value: accuracy; a minimized first objective: the lowest first); then, in that order and up to
    `most` in all (default ``2 * k``), every further one whose value is within `tie` of a chosen one's (default
    :data:`TIE_MARGIN` for a maximized value, which is an accuracy; 0 otherwise): a trial's value is one seed's,
    and operators that close cannot be told apart by it, so the final stage's seeds decide between them."""
    if k <= 0:
        return []
    maximize = maximizes(study)
    tie = (TIE_MARGIN if maximize else 0.0) if tie is None else tie
    most = max(k, 2 * k if most is None else most)
    sign = -1.0 if maximize else 1.0
    trials = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
              if not t.user_attrs.get(V.BASELINE) and primary_value(t) is not None and _faster(study, t)]
    front = {t.number for t in operator_front(study)} if is_pareto(study) else set()
    trials.sort(key=lambda t: (t.number not in front, sign * primary_value(t), t.number))  # type: ignore[operator]
    chosen: list[optuna.trial.FrozenTrial] = []
    seen: set[str] = set()
    for t in trials:
        h = t.user_attrs.get(V.HASH)
        if h in seen:
            continue
        if len(chosen) >= k:   # past k: only a value within the noise of a chosen one's
            value = primary_value(t)
            # 1e-9: a difference of exactly `tie` (0.95 - 0.94) is within it, whatever the floats round to
            if len(chosen) >= most or all(abs(value - primary_value(c)) > tie + 1e-9 for c in chosen):  # type: ignore
                continue
        seen.add(h)
        chosen.append(t)
    return chosen


def far_outside(value: float | None, baseline: float | None, margin: float, maximize: bool,
                metric: str = "val_acc") -> str | None:
    """Why a finalist whose search trial reached `value` is not re-trained (None: it is): worse than the baseline
    trial's `baseline` by more than FAR_OUTSIDE × `margin` (accuracy: absolute, in pp; a loss: absolute, in nats).
    A margin of 0 or less (nothing may be lost) judges nothing: every finalist is re-trained."""
    if value is None or baseline is None or margin <= 0:
        return None
    gap = baseline - value if maximize else value - baseline
    if gap <= FAR_OUTSIDE * margin + 1e-12:
        return None
    if maximize:
        behind, allowed = f"{gap * 100:.1f} pp below", f"{margin * 100:g} pp"
    else:
        behind, allowed = f"{gap:.3g} nats above", f"{margin:g} nats"
    return (f"not re-trained: its trial's {metric} {value:.3f} is {behind} the baseline's {baseline:.3f}, more than "
            f"{FAR_OUTSIDE}× the {allowed} margin")


def _no_candidate(study: optuna.Study, context: SearchContext) -> str:
    """What an empty final stage says: measured faster on the speed target (a study whose second objective is the
    measured time ratio), else cheaper by the plan."""
    if speed_ratio_name(study) == TIME_RATIO:
        return no_faster_operator(context.resolved.speed.name)
    return NO_CHEAPER_OPERATOR


def _faster(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
    """Whether the trial's operator beat the replaced layers by the study's own speed figure: a pareto study's
    second value (the measured time ratio, or the planned cost ratio), else the planned cost ratio."""
    ratio = speed_ratio_of(study, trial)
    return ratio is not None and ratio < 1.0


def _final_run(tracker: Any, parent: str | None, study: str, label: str, op: Any, trial: int | None) -> Any:
    """A run ``final-<label>`` (tag syno.role = final), child of the study's run; the operator's artifacts."""
    tags = {V.TAG_STUDY: study, V.TAG_ROLE: V.ROLE_FINAL, V.HASH: label}
    if parent is not None:
        tags["mlflow.parentRunId"] = parent
    if trial is not None:
        tags[V.TAG_SEARCH_TRIAL] = str(trial)
    run = tracker.run(tracker.client.create_run(tracker.experiment_id, run_name=f"final-{label}",
                                                tags=tags).info.run_id)
    if op is not None:
        run.log_operator(op)
    return run


def _end_abandoned_final_runs(tracker: Any, study: str) -> None:
    """Final-stage runs of `study` still RUNNING belong to a final stage that was killed (a Ctrl-C ends its own
    runs): a new final stage marks them KILLED, so that the study's runs show one live final stage at most."""
    for found in tracker.final_runs(study, running=True):
        run = tracker.run(found.info.run_id)
        run.log_failure("abandoned: its final stage was stopped; a later final stage re-trained it")
        run.finish("KILLED")


def retrain(context: SearchContext, finalist: Finalist, op: Any, seeds: int, budget: int, run: Any | None = None,
            out: TextIO | None = None) -> Finalist:
    """Trains the task with `op` (None: the baseline) substituted once per seed ``config.seed + s`` for `budget`
    epochs (lm: steps, as a search trial of ``--steps budget`` without a time budget); fills
    ``finalist.values``/``failures`` and logs to `run` ``final_<metric>``, the mean over the seeds (first: MLflow's
    Compare opens on a run's first metric), ``_mean`` and ``_sd``, then ``final_<metric>_seed`` per seed (step s)."""
    import syno_automl.study.training as training

    config = context.config
    name = config.objective_name
    task = context.task
    per_seed: list[tuple[int, float]] = []
    for s in range(seeds):
        changes: dict[str, Any] = {"seed": config.seed + s, **task.final_changes(budget)}
        # a seed and a training length: nothing that was resolved from the config changes
        seeded = dataclasses.replace(context, config=dataclasses.replace(config, **changes))
        started = time.time()
        try:
            value = training.train_operator(seeded, None, None, epochs=budget, operator=op, milestones={}, timeout=None,
                                   steps=task.final_steps(budget))
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 -- one seed's failure (NaN loss...) is recorded, the others still count
            finalist.failures.append(f"seed {s}: {type(e).__name__}: {e}"[:500])
            if run is not None:
                run.log_text(traceback.format_exc(), f"failure-seed{s}.txt")
            what = f"failed ({type(e).__name__})"
        else:
            finalist.values.append(value)
            per_seed.append((s, value))
            what = f"{name} {value:.4f}"
        if out is not None:
            print(f"  final {finalist.label:<16} seed {s}  {what}  ({time.time() - started:.1f} s)", file=out,
                  flush=True)
    if run is not None:
        run.log_metrics({V.final_metric(name): finalist.mean, V.final_metric(name, "mean"): finalist.mean,
                         V.final_metric(name, "sd"): finalist.sd})
        run.log_series(V.final_metric(name, "seed"), per_seed)
    return finalist


def expected_seconds(study: optuna.Study, context: SearchContext, budget: int, trainings: int) -> float | None:
    """How long `trainings` trainings of `budget` units take, from the search's own completed trials (the median
    trial's seconds, scaled by `budget` over a trial's budget); None without a completed trial to go by."""
    seconds = [t.duration.total_seconds() for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
               if t.duration is not None]
    per_unit = statistics.median(seconds) / max(1, context.task.trial_budget(context.config)) if seconds else None
    return per_unit * budget * trainings if per_unit else None


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else \
        f"{seconds / 3600:.1f} h"


def run_final_stage(study: optuna.Study, context: SearchContext, tracker: Any | None = None, parent: str | None = None,
                    out: TextIO | None = sys.stdout) -> FinalResult | None:
    """Chooses, re-trains and times the finalists; logs the result; returns it (None: stage off)."""
    from syno_automl.search.sampler import operator_json_of
    from syno_automl.space import Operator

    config = context.config
    if config.finalists <= 0 or config.final_seeds <= 0:
        return None
    started = time.time()
    (budget, unit), seeds = context.task.final_budget(config), config.final_seeds
    trials = choose_finalists(study, config.finalists)
    no_candidate = _no_candidate(study, context)
    base_trial = baseline_trial(study)
    far = {t.number: why for t in trials if (why := far_outside(
        primary_value(t), primary_value(base_trial) if base_trial is not None else None, config.final_margin,
        context.task.direction == "maximize", config.objective_name)) is not None}
    if far and len(far) == len(trials):
        no_candidate = (f"every finalist's trial value is more than {FAR_OUTSIDE}× --final-margin from the "
                        f"baseline's")
    far_trials = [t for t in trials if t.number in far]
    trials = [t for t in trials if t.number not in far]
    if out is not None:
        extra = (f" ({len(trials) - config.finalists} beyond --finalists {config.finalists}: trial values within "
                 f"{TIE_MARGIN * 100:g} pp of a chosen one's)") if len(trials) > config.finalists else ""
        if far_trials and trials:
            extra += (f" ({len(far_trials)} more not re-trained: trial values more than {FAR_OUTSIDE}× "
                      f"--final-margin from the baseline's)")
        eta = expected_seconds(study, context, budget, (len(trials) + 1) * seeds) if trials else None
        about = f" (about {_duration(eta)}, from the search's trials)" if eta else ""
        print(f"final stage: re-training {counted(len(trials), 'finalists')}{extra} and the baseline, "
              f"{counted(seeds, 'seeds')} × {counted(budget, unit)} each{about}" if trials else
              f"final stage: no finalist ({no_candidate}): nothing re-trained",
              file=out, flush=True)
    ops = []
    for t in [*trials, *far_trials]:
        text = operator_json_of(t)
        assert text is not None  # choose_finalists picks operator trials: each holds its operator's JSON
        ops.append(Operator.from_json(context.space, text))
    baseline = Finalist("baseline", base_trial.number if base_trial else None, "the original layers", 1.0,
                        primary_value(base_trial) if base_trial is not None else None)
    # an opening trial runs a known form (known.opening): the verdict names it, so that it reads as known, not found
    candidates = [Finalist(op.hash, t.number, t.user_attrs.get(V.OPENING) or describe_kind(op),
                           t.user_attrs.get(V.COST_RATIO), primary_value(t), flops=t.user_attrs.get(V.FLOPS),
                           params=t.user_attrs.get(V.PARAMS), skipped=far.get(t.number))
                  for t, op in zip([*trials, *far_trials], ops)]
    skipped, candidates, ops = candidates[len(trials):], candidates[:len(trials)], ops[:len(trials)]
    # no finalist: nothing to compare the baseline with, so it is not re-trained either
    if tracker is not None:
        _end_abandoned_final_runs(tracker, config.study)
    for finalist, op in zip([baseline, *candidates] if candidates else [], [None, *ops]):
        check_interrupt()   # one a finalizer swallowed (the previous finalist's training) stops the stage here
        run = None
        if tracker is not None:
            run = _final_run(tracker, parent, config.study, finalist.label, op, finalist.trial)
            finalist.run_id = run.run_id
            if op is not None:   # what the operator runs as on each speed target the stage measures
                run.log_kernels(op, [t.name for t in measured_targets(context)])
        try:
            retrain(context, finalist, op, seeds, budget, run, out)
        except KeyboardInterrupt:  # the run says so, rather than staying RUNNING for ever
            if run is not None:
                run.log_failure(stop_reason())
                run.finish("KILLED")
            raise
        if run is not None:
            run.finish("FINISHED" if finalist.values else "FAILED")
    speed = _timed_stage(context, ops)
    _apply_speeds(speed, baseline, candidates)
    # the speedup named by its target too: speedup.cpu.eager, speedup.cuda.compiled ...
    _log_speedups(tracker, [baseline, *candidates], context.resolved.speed)
    task = context.task
    if task.counts_tokens and speed.baseline_ms:  # the baseline's tokens over its median latency; an operator's:
        # that times its speedup (the paired ratio, not its own median's), so that the tokens/s ratio is the
        # speedup the verdict gives
        baseline.tokens_per_s = int(context.timing_example.numel()) / (speed.baseline_ms / 1e3)
        for finalist in candidates:
            finalist.tokens_per_s = baseline.tokens_per_s * finalist.speedup if finalist.speedup else None
    timing = speed.label
    # lm margin: absolute nats of val_loss. A loss difference d is a perplexity ratio exp(d), so 0.01 nats is ~1 %
    # more perplexity at any loss level; a margin relative to the loss would instead tighten as the model improves
    result = FinalResult(baseline, candidates, seeds=seeds, epochs=budget, margin=config.final_margin,
                         timing=timing, metric=task.final_metric, maximize=task.direction == "maximize",
                         seconds=time.time() - started, unit=unit, no_candidate=no_candidate, skipped=skipped)
    _record(study, result, config.objective_name, tracker, parent, context)
    if out is not None:
        print(f"final stage ({result.seconds:.0f} s):", file=out)
        print("\n".join(result.table()), file=out, flush=True)
        for warning in result.warnings():
            print(f"  warning: {warning}", file=out, flush=True)
    for other in measured_targets(context)[1:]:
        _measure_also(context, ops, [baseline, *candidates], other, tracker, out)
    return result


def measured_targets(context: SearchContext) -> list[SpeedTarget]:
    """The speed targets the final stage measures: the verdict's (the context's resolved ``speed``), then
    --also-measure's, each once."""
    return context.resolved.speed_targets


def _timed_stage(context: SearchContext, ops: list[Any], target: SpeedTarget | None = None) -> SpeedMeasurement:
    """The speed protocol over the finalists (nothing to time without one), in two sessions pooled, each in the
    process --speed-process names: a fresh one (the default) or the search's own (speed/sessions.py)."""
    if not ops:
        return SpeedMeasurement("not timed")
    return measure_final(context.speed_subject(target), ops, process=context.resolved.speed_process)


def _apply_speeds(speed: SpeedMeasurement, baseline: Finalist, candidates: list[Finalist]) -> None:
    """Each finalist's speedup with its interval; the baseline's is 1 by definition, its interval the control's
    (the original against itself: the protocol's own noise)."""
    baseline.latency_ms = speed.baseline_ms
    baseline.speedup = 1.0 if speed.measured else None
    if speed.control is not None:
        baseline.speedup_low, baseline.speedup_high = speed.control.low, speed.control.high
    for finalist, estimate in zip(candidates, speed.estimates):
        if estimate is not None:
            finalist.latency_ms, finalist.speedup = estimate.candidate_ms, estimate.ratio
            finalist.speedup_low, finalist.speedup_high = estimate.low, estimate.high


def _measure_also(context: SearchContext, ops: list[Any], finalists: list[Finalist], target: SpeedTarget,
                  tracker: Any | None, out: TextIO | None) -> None:
    """Times the finalists on one more speed target: ``speedup.<target>`` on their runs and one line after the
    table. The verdict stays the main target's."""
    speed = _timed_stage(context, ops, target)
    copies = [dataclasses.replace(f) for f in finalists]
    _apply_speeds(speed, copies[0], copies[1:])
    _log_speedups(tracker, copies, target)
    if out is not None:
        shown = ", ".join(f"{f.label} {f.speedup_text()}" for f in copies[1:])
        print(f"  also on {target}: {shown or 'no finalist'} ({speed.label})", file=out, flush=True)


def _log_speedups(tracker: Any | None, finalists: list[Finalist], target: SpeedTarget) -> None:
    """``speedup.<target>`` and its interval's ends on each finalist's run (those measured, with a run)."""
    if tracker is None:
        return
    for f in finalists:
        if f.run_id is not None and f.speedup is not None:
            metrics = {V.speedup_metric(target.name): f.speedup}
            if f.speedup_low is not None and f.speedup_high is not None:
                metrics.update({V.speedup_metric(target.name, "low"): f.speedup_low,
                                V.speedup_metric(target.name, "high"): f.speedup_high})
            tracker.run(f.run_id).log_metrics(metrics)


def _record(study: optuna.Study, result: FinalResult, name: str, tracker: Any | None, parent: str | None,
            context: SearchContext | None = None) -> None:
    """The table on the study (user attr syno.final); speedups and planned cost ratios on the finalists' runs (the
    baseline's: the replaced layers too, as its search run); the verdict on the study's run (tags
    syno.final_verdict / syno.final_hash, metrics final_*, the artifact final.json, and the run's description:
    the verdict and the table, the first thing MLflow's run page shows)."""
    study.set_user_attr(V.FINAL, result.to_dict())
    if tracker is None:
        return
    for f in [result.baseline, *result.candidates]:
        if f.run_id is not None:
            run = tracker.run(f.run_id)
            cost = None if context is None or f.cost_ratio is None else \
                f.cost_ratio * context.substitution.baseline_cost   # the planned cost, as the trial runs have it
            run.log_metrics({V.METRIC_FINAL_LATENCY: f.latency_ms, V.METRIC_FINAL_SPEEDUP: f.speedup,
                             V.METRIC_FINAL_TOKENS_PER_S: f.tokens_per_s, "cost_ratio": f.cost_ratio, "cost": cost})
            if f is result.baseline and context is not None:
                from syno_automl.study.trial import log_baseline_run

                log_baseline_run(run, context)
    if parent is None:
        return
    run = tracker.run(parent)
    chosen, best = result.chosen, result.best
    metrics = {V.final_metric(f"baseline_{name}", "mean"): result.baseline.mean,
               V.final_metric(f"baseline_{name}", "sd"): result.baseline.sd,
               V.METRIC_FINAL_FOUND: 1.0 if chosen is not None else 0.0}
    pick = chosen or best
    if pick is not None:
        metrics.update({V.final_metric(name, "mean"): pick.mean, V.final_metric(name, "sd"): pick.sd,
                        V.METRIC_FINAL_SPEEDUP: pick.speedup, V.METRIC_FINAL_TOKENS_PER_S: pick.tokens_per_s})
    run.log_metrics(metrics)
    run.set_tags({V.TAG_FINAL_VERDICT: result.verdict(), V.TAG_FINAL_HASH: chosen.label if chosen else "none"})
    run.log_json(result.to_dict(), V.ARTIFACT_FINAL)
    from syno_automl.tracking.ui import escape_markdown  # s^-1*H is no emphasis, [...] no link

    note = (f"**{escape_markdown(result.verdict())}**\n\nFinal stage: re-trained alike, {result.budget_text()}; "
            f"{V.ARTIFACT_FINAL} holds every figure.\n\n```\n" + "\n".join(result.table()) + "\n```\n")
    try:  # set_tags would cut the note at 500 characters, as it does params
        tracker.client.set_tag(parent, "mlflow.note.content", note)
    except Exception as e:  # noqa: BLE001 -- logging never stops a search
        import logging

        logging.getLogger(__name__).warning("MLflow: could not describe run %s: %s", parent, e)
