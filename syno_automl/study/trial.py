"""One search trial (the Optuna objective): baseline or operator, trained, logged to its MLflow run, printed."""
from __future__ import annotations

import math
import signal
import sys
import time
import traceback
from typing import Any, TextIO

import optuna

import syno_automl.study.training as training
from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig
from syno_automl.interrupt import STOP_REASONS, check_interrupt, stop_reason
from syno_automl.optuna_private import has_constraint, retry_history, trial_id_of
from syno_automl.search.objectives import baseline_trial, primary_value
from syno_automl.search.sampler import suggest_operator
from syno_automl.space import Operator
from syno_automl.study.context import SearchContext
from syno_automl.study.trial_speed import TrialSpeed, speed_objective_of

__all__ = ["Objective", "INTERRUPTED", "log_baseline_run"]

#: what a trial stopped by Ctrl-C records (stop_reason(): the text for the signal received)
INTERRUPTED = STOP_REASONS[signal.SIGINT]


def _failure_reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    cause = error.__cause__
    if cause is not None and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {cause})"
    return text


class Objective:
    """Trains one trial: baseline or operator; returns the final validation accuracy (image) or loss (lm), and
    (pareto) its speed ratio (the baseline's: 1.0): the measured time ratio, 1 / the speedup the trial measured
    before its training, or the planned cost ratio (the study's speed objective: study/trial_speed.py).

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
        self.screen: Any = None   # study/screen.py's Screen, made at the first operator trial when config.screen
        self.speed: TrialSpeed | None = None   # made at the first trial, for its study's speed objective

    def __call__(self, trial: optuna.trial.Trial) -> float | tuple[float, float]:
        check_interrupt(lambda: trial.set_user_attr(V.FAILURE, INTERRUPTED))   # one a finalizer swallowed
        config, context = self.config, self.context
        baseline = bool(trial.user_attrs.get(V.BASELINE))
        run = None
        op: Operator | None = None
        started = time.time()
        self._close_lost_run(trial)
        if baseline and not has_constraint(trial, V.BASELINE_CONSTRAINT):  # (a retried baseline has it)
            # the reference, not a candidate: infeasible, so study.best_trial is the best operator
            trial.set_constraint(V.BASELINE_CONSTRAINT, 1.0)
        try:
            try:
                if not baseline:
                    op = suggest_operator(trial)
            finally:  # a run even for a trial whose operator could not be given (reason recorded below)
                if self.tracker is not None:
                    run = self.tracker.trial_run(self.parent_run_id, config.study, trial.number, op,
                                                 settings=_trial_run_settings(config),
                                                 tags={"optuna.study": config.study},
                                                 label=None if op is not None or baseline else "no-operator")
                    trial.set_user_attr(V.RUN_ID, run.run_id)
            speed = self._speed(trial)
            # before training, so that pruned and failed trials have it too; its MLflow run gets it at the end
            # (_log_speed), so that the run's first metric is its accuracy, which MLflow's Compare opens on
            speed.measure(trial, None, op)
            if op is not None and config.screen != "off":
                self._screen(trial, run)
            value = training.train_operator(context, trial, run, epochs=config.epochs)
            cost = 1.0 if baseline else trial.user_attrs.get(V.COST_RATIO)
            second = speed.objective_value(trial, baseline) if config.objective == "pareto" else None
            if baseline and run is not None:
                log_baseline_run(run, context)
            extra = context.task.trial_line(trial, run, baseline)
            if op is not None and config.latency_targets:
                extra += self._latency(trial, run, op, value)
        except KeyboardInterrupt:  # Ctrl-C: this trial fails now (Optuna marks it FAIL and re-raises)
            reason = stop_reason()
            trial.set_user_attr(V.FAILURE, reason)
            if run is not None:
                run.log_failure(reason)
                run.finish("KILLED")
            self._print(trial, op, "interrupted", started)
            raise
        except optuna.TrialPruned as e:
            trial.set_user_attr(V.PRUNED, str(e)[:1000])
            if run is not None:  # stopped on purpose, not broken: FINISHED with its reason (KILLED: interrupted)
                self._log_speed(run)
                run.set_tags({V.TAG_PRUNED: str(e)})
                run.finish("FINISHED")
            self._print(trial, op, f"pruned ({e})", started)
            raise
        except Exception as e:
            reason = _failure_reason(e)
            trial.set_user_attr(V.FAILURE, reason[:1000])
            if run is not None:
                self._log_speed(run)
                run.log_failure(reason, traceback.format_exc())
                run.finish("FAILED")
            self._print(trial, op, f"failed: {reason[:160]}", started)
            raise
        if run is not None:
            self._log_speed(run)
            run.finish("FINISHED")
        ratio = trial.user_attrs.get(V.FLOPS_RATIO)
        self._print(trial, op, f"{config.objective_name} {value:.4f}"
                    + (f"  flops {ratio:.3f}x" if ratio is not None else "")
                    + (f"  cost {cost:.3f}x" if cost is not None and not baseline else "") + speed.text(trial)
                    + extra, started)
        chance = context.task.near_chance(value, context.num_classes) if baseline else None
        if chance is not None and self.out is not None:
            print(f"      warning: the baseline's {chance}: the trials cannot rank operators at this budget; train "
                  f"longer (--epochs, --steps) or choose a smaller model", file=self.out, flush=True)
        return (value, second) if second is not None else value

    def _log_speed(self, run: Any) -> None:
        if self.speed is not None:
            self.speed.log_last(run)

    def _speed(self, trial: optuna.trial.Trial) -> TrialSpeed:
        if self.speed is None:
            self.speed = TrialSpeed(self.context, speed_objective_of(trial.study))
        return self.speed

    def _screen(self, trial: optuna.trial.Trial, run: Any | None) -> None:
        """Scores the trial's operator cheaply before its training (study/screen.py, seeded as the training);
        raises ScreenedOut (an optuna.TrialPruned: the MCTS rewards it as a pruned trial) when it fails."""
        from syno_automl.study.screen import Screen, ScreenedOut

        if self.screen is None:
            self.screen = Screen(self.context, self.config.screen, self.config.screen_threshold)
        result = self.screen.score(trial, seed=self.config.seed + trial.number)
        trial.set_user_attr(V.SCREEN_SCORE, result.score if math.isfinite(result.score) else None)
        if run is not None and math.isfinite(result.score):
            run.log_metrics({V.METRIC_SCREEN_SCORE: result.score})
        if not result.passed:
            trial.set_user_attr(V.SCREENED, result.reason())
            raise ScreenedOut(result.reason())

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
            sizes = self.context.task.latency_sizes(config)
            out = self.out
            progress = (None if out is None or config.latency_trials <= 0 else
                        lambda line: print(f"  [trial {trial.number}] tuning {line}", file=out, flush=True))
            request = measure.MeasureRequest(targets=config.latency_targets, trials=config.latency_trials,
                                             inductor=config.latency_inductor, seed=config.seed,
                                             protocol=measure.PROTOCOL)
            result = measure.measure_layers(op, request, sizes=sizes, progress=progress)
        except Exception as e:  # noqa: BLE001 -- TVM missing or broken: the trial keeps its value
            reason = f"{type(e).__name__}: {e}"[:300]
            trial.set_user_attr(V.LATENCY_FAILURE, reason)
            if run is not None:
                run.set_tags({V.LATENCY_FAILURE: reason})
            return f"  latency: missing ({reason[:80]})"
        entries = {dev: measure.stored_entry(d) for dev, d in result["devices"].items()}
        trial.set_user_attr(V.LATENCY, entries)
        if run is not None:
            from syno_automl.tracking import log_latency

            log_latency(run, result)
            # what ran on each measured target: TVM's kernels (tvm.llvm, tvm.cuda), or the eager module (torch)
            kernels = {"llvm": "tvm.llvm", "cuda": "tvm.cuda", "torch": "cpu.eager"}
            run.log_kernels(op, [kernels[t.split()[0]] for t in config.latency_targets if t.split()[0] in kernels],
                            mapping=0)
        self._log_baseline_latency(base, result)
        # every speedup says how both sides were scheduled: "(untuned)", "(tuned 64 trials)", "(eager)"
        parts = [f"{dev} {e['speedup']:.2f}x ({e.get('tag')})" if e["speedup"] is not None else f"{dev} missing"
                 for dev, e in entries.items()]
        return "  speedup " + ", ".join(parts)

    def _log_baseline_latency(self, base: optuna.trial.FrozenTrial | None, result: dict[str, Any]) -> None:
        """The baseline trial's run gets the replaced layers' latency as its own ``latency_ms.<device>`` (speedup
        1), once per device, so that MLflow's compare view shows the baseline beside the operators."""
        run_id = base.user_attrs.get(V.RUN_ID) if base is not None else None
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
        system = trial.storage.get_trial_system_attrs(trial_id_of(trial))
        lost = system.get("failed_trial")
        if self.tracker is None or lost is None:
            return
        history = retry_history(system) or [lost]
        previous = history[-1] if history else lost
        found = self.tracker.find_trial_run(self.config.study, number=previous)
        if found is not None and found.info.status == "RUNNING":
            run = self.tracker.run(found.info.run_id)
            run.log_failure(f"worker lost mid-trial (heartbeat stale); retried as trial {trial.number}")
            run.finish("FAILED")

    def _print(self, trial: optuna.trial.Trial, op: Operator | None, what: str, started: float) -> None:
        if self.out is None:
            return
        if op is not None:
            label = op.hash
        else:   # no operator: the baseline, or a trial the sampler had nothing left for (an exhausted space)
            label = "baseline        " if trial.user_attrs.get(V.BASELINE) else "no operator     "
        done = len(trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                                    optuna.trial.TrialState.PRUNED,
                                                                    optuna.trial.TrialState.FAIL)))
        print(f"[{done + 1:>3}] trial {trial.number:<3} {label}  {what}  ({time.time() - started:.1f} s)",
              file=self.out, flush=True)


def _trial_run_settings(config: SearchConfig) -> dict[str, Any]:
    """What a trial run repeats of the search settings (all of them are on the study's parent run)."""
    from syno_automl.tracking import TRIAL_RUN_SETTINGS

    settings = config.settings()
    return {k: settings[k] for k in TRIAL_RUN_SETTINGS if k in settings}


def log_baseline_run(run: Any, context: SearchContext) -> None:
    """A baseline run's artifact, the replaced layers (so comparing runs in MLflow keeps artifact columns), and its
    planned cost: the replaced layers' own, cost ratio 1.0 (the operators' runs have both)."""
    sub = context.substitution
    run.log_metrics({"cost": sub.baseline_cost, "cost_ratio": 1.0})
    run.log_json({"replaced_layers": [{"name": name, "kind": ph.kind, "layer": repr(ph.referred_layer),
                                       "mapping": sub.space.mapping(i)}
                                      for i, (name, ph) in enumerate(sub.placeholders)],
                  "baseline_flops": sub.baseline_flops, "space": str(sub.space.input_shape) + " -> "
                  + str(sub.space.output_shape)}, V.ARTIFACT_BASELINE)
