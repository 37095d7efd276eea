"""``syno-automl enumerate`` (the space's counts and canonical rates), ``reevaluate`` (retrain chosen operators)
and ``tune`` (TVM latency against the replaced layers): the commands that measure beyond the search."""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syno_automl import vocabulary as V
from syno_automl.cli.common import load_study, operator_of, quiet_logs, require_cuda, require_tvm, tracking_of
from syno_automl.cli.lookup import find_trial
from syno_automl.cli.options import config_of, dest_of, fill_from_recorded
from syno_automl.errors import LatencyError, OptionError
from syno_automl.settings import REEVALUATE_DEFAULTS, SETTINGS, SPACE_COMMANDS

if TYPE_CHECKING:
    from syno_automl.study.context import SearchContext

__all__ = ["cmd_enumerate", "cmd_reevaluate", "cmd_tune"]


def cmd_enumerate(args: argparse.Namespace) -> int:
    config = config_of(args, tracking_uri=None)
    config.validate()   # a wrong option is said before the imports
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    say(f"syno-automl: the space of {config.model} on {config.dataset}; loading torch, Lightning...")
    quiet_logs(training=True, verbose=args.verbose)
    from syno_automl.report import canonical_rate_table

    context = _prepared(config)
    space = context.space
    print(f"space: {space.input_shape} -> {space.output_shape}, primary {space.primary}, coefficients "
          f"{space.coefficients}, {space.num_mappings} mappings, max_depth {space.max_depth}, "
          f"budgets {space.budgets}", flush=True)
    limit = args.time_limit if args.time_limit > 0 else None   # 0: no limit
    e, depth, whole = enumerate_by_depth(space, limit, say)
    print(_enumeration_line(space, limit, e, depth, whole))
    complete = whole[0] if whole is not None else 0
    print(f"the walk to depth {depth} ({'complete' if depth == complete else 'stopped: its counts are partial'}):")
    print("| depth | nodes | final |\n|---:|---:|---:|")
    for d, (n, f) in enumerate(zip(e.nodes_per_depth, e.finals_per_depth)):
        print(f"| {d} | {n} | {f} |")
    say("sampling 32 operators...")
    ops = space.sample(32, seed=config.seed, time_limit=args.time_limit)
    r = space.last_report
    print(f"sampling: {len(ops)} operators from {r.attempts} random descents "
          f"({len(ops) / max(r.attempts, 1):.1%} reach an operator) in {r.seconds:.1f} s")
    print(canonical_rate_table(space.stats()))
    return 0


#: seconds between the lines that say a long walk is still going
WALK_TICK = 15.0


def enumerate_by_depth(space: Any, time_limit: float | None, say: Any) -> tuple[Any, int, tuple[int, Any] | None]:
    """Walks `space` to depth 1, then 2, ... up to its max_depth (each walk whole, counting every operator of at most
    that many primitives), until a walk is stopped or `time_limit` seconds (None: no limit) are spent in all; `say`
    gets a line as each walk ends, and every WALK_TICK seconds of a long one. A whole space is often far too large
    to walk in a minute (the default's has millions of nodes), and its operators are mostly at the deepest levels: a
    single walk to the full depth would stop with no operator counted, where the shallower walks are complete.
    Returns (the last walk's Enumeration, its depth, (the deepest depth walked whole, its Enumeration) or None)."""
    import time

    started = time.monotonic()
    whole: tuple[int, Any] | None = None
    last, walked = None, 0
    for depth in range(1, space.max_depth + 1):
        left = None if time_limit is None else time_limit - (time.monotonic() - started)
        if left is not None and left <= 0 and last is not None:
            break
        last, walked = _walk(space, depth, left, say), depth
        done = last.stop_reason == "exhausted"
        say(f"  depth <= {depth}: {last.operator_count:,} operators, {sum(last.nodes_per_depth):,} nodes in "
            f"{last.seconds:.1f} s" + ("" if done else f" (stopped: {_stop_reason(last.stop_reason)}; partial)"))
        if not done:
            break
        whole = (depth, last)
    assert last is not None   # the first walk always runs
    return last, walked, whole


def _walk(space: Any, depth: int, seconds: float | None, say: Any) -> Any:
    """One walk of `space` to `depth` (at most `seconds`), `say` told every WALK_TICK seconds that it goes on (the
    core releases the GIL while it walks: a thread speaks meanwhile)."""
    import threading
    import time

    stop = threading.Event()

    def tick() -> None:
        begun = time.monotonic()
        while not stop.wait(WALK_TICK):
            say(f"  depth <= {depth}: walking ({time.monotonic() - begun:.0f} s)...")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        return space.enumerate(max_depth=depth, time_limit=None if seconds is None else max(seconds, 1e-3),
                               max_operators=0)
    finally:
        stop.set()
        ticker.join()


def _stop_reason(reason: str) -> str:
    return {"time": "the time limit", "limit": "the node limit"}.get(reason, reason)


def _enumeration_line(space: Any, limit: float | None, e: Any, depth: int, whole: tuple[int, Any] | None) -> str:
    """What the walks found, and why they stopped where they did."""
    complete = whole[0] if whole is not None else 0
    if whole is not None and complete == space.max_depth:
        return (f"enumeration: {e.operator_count:,} operators, the whole space (at most {space.max_depth} primitives), "
                f"in {e.seconds:.1f} s")
    found = (f"complete to depth {complete}: {whole[1].operator_count:,} operators of at most {complete} primitives"
             if whole is not None else "no depth walked whole")
    further = (f"depth {depth} stopped by {_stop_reason(e.stop_reason)} after {e.seconds:.0f} s with "
               f"{e.operator_count:,} operators counted so far" if depth > complete else
               f"no time left for depth {complete + 1}")
    return (f"enumeration: {found}; {further}; the space goes to depth {space.max_depth}, too large to walk in "
            f"{'this time' if limit is not None else 'one go'} (--time-limit S, 0: no limit; the sampling below "
            f"reaches every depth)")


def cmd_reevaluate(args: argparse.Namespace) -> int:
    from syno_automl.search.objectives import primary_value
    from syno_automl.search.sampler import operator_json_of
    from syno_automl.space import Operator
    from syno_automl.study.training import train_operator

    study = load_study(args)
    # the baseline is retrained at the same budget, first: the operators' new figures are judged against it
    refs = [h for h in args.hashes if h.lower() != "baseline"]
    found: list[tuple[Any, Any]] = [operator_of(study, h) for h in refs]
    if not args.no_baseline:
        found.insert(0, (find_trial(study, "baseline"), None))
    budget_given = args.epochs is not None, args.steps is not None
    recorded = _recorded_settings(study)
    for s in SETTINGS:   # the space's budgets (no flag here) are the study's: its operators are re-trained
        if s.flag and s.commands == SPACE_COMMANDS:
            setattr(args, dest_of(s), None)
    fill_from_recorded(args, recorded)  # as a --resume: the flags not given take the study's settings
    config = config_of(args, tracking_uri=tracking_of(args), study=args.study)
    if not budget_given[0] and config.task == "image":  # re-training is longer than a trial by default
        config.epochs = REEVALUATE_DEFAULTS["epochs"]
    if not budget_given[1] and config.task == "lm":
        config.max_steps = REEVALUATE_DEFAULTS["max_steps"]
    if not args.quiet:
        from syno_automl.config import describe_diff, settings_diff
        from syno_automl.settings import SETTING

        diff = {k: v for k, v in settings_diff(recorded, config.settings()).items()  # the flags given here
                if k in SETTING and "reevaluate" in SETTING[k].commands}
        print(f"re-training {config.model} on {config.dataset}{_image_size(config)} as the search did"
              + (f", but: {describe_diff(diff, limit=12)}" if diff else ""), flush=True)
    quiet_logs(training=True, verbose=args.verbose)
    context = _prepared(config)
    label, schedule = config.objective_name, context.task.budget_label(config)
    free_space = context.space.with_mappings(context.space.mappings)  # the new model's sizes, no FLOPs budget
    tracker = None
    if config.tracking_uri:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(config.tracking_uri)
    models = []   # (trial, operator, the operator in the new model's sizes; None: the baseline)
    for trial, op in found:
        text = operator_json_of(trial) if op is not None else None  # (operator_of found it: not None)
        models.append((trial, op, Operator.from_json(free_space, text) if text is not None else None))
    timed = _TimedTogether(context, [local for _, _, local in models if local is not None])
    for trial, op, local in models:
        name = op.hash if op is not None else "baseline"
        run = None
        if tracker is not None:
            search_run = tracker.find_trial_run(study.study_name, number=trial.number)
            run = tracker.reevaluation_run(study.study_name, local, search_run, trial.number, config.settings())
        try:
            acc = train_operator(context, None, run, epochs=config.epochs, operator=local, milestones={},
                                 timeout=None)
        except Exception as e:  # noqa: BLE001 -- a trial's failure is recorded, the others still run
            if run is not None:
                run.log_failure(f"{type(e).__name__}: {e}", traceback.format_exc())
                run.finish("FAILED")
            print(f"{name}: failed: {type(e).__name__}: {e}")
            continue
        speed = _remeasured(context, study, run, local, timed)
        if run is not None:
            run.finish("FINISHED")
        print(f"{name}: {label} {acc:.4f} with {config.model} on {config.dataset}{_image_size(config)} after {schedule}"
              + (f" (search trial {trial.number}: {primary_value(trial):.4f})" if primary_value(trial) is not None
                 else "") + speed
              + (f"  [MLflow run {run.run_id}]" if run is not None else ""))
        chance = context.task.near_chance(acc, context.num_classes)
        if chance is not None:   # a figure that low ranks nothing: said, not left to be read as a result
            print(f"syno-automl: warning: {name}: {chance}: it learned next to nothing in {schedule}; train longer "
                  f"(--epochs, lm: --steps) or check the data", file=sys.stderr, flush=True)
    return 0


class _TimedTogether:
    """The operators `reevaluate` re-trains and the original, timed afresh on the speed target as the final stage
    times its finalists: all in the same sessions (in fresh processes, pooled; three here, as one operator and the
    control alone give the spread between sessions few degrees of freedom), once, at the first model that asks.
    The original against itself (the control: the baseline's figure) is timed once for all, not once per model."""

    def __init__(self, context: SearchContext, ops: list[Any]) -> None:
        self.context, self.ops = context, ops
        self._measured: Any = None

    def __call__(self, op: Any) -> Any:
        """`op`'s pooled estimate (None: the control's)."""
        if self._measured is None:
            from syno_automl.speed.sessions import REMEASURE_SESSIONS, measure_final

            self._measured = measure_final(self.context.speed_subject(), self.ops, sessions=REMEASURE_SESSIONS,
                                           process=self.context.resolved.speed_process)
        if op is None:
            return self._measured.control
        return self._measured.estimates[next(i for i, o in enumerate(self.ops) if o is op)]


def _remeasured(context: SearchContext, study: Any, run: Any | None, op: Any, timed: _TimedTogether) -> str:
    """`op` (None: the original against itself) timed afresh (`timed`: with the other models re-trained), never read
    from the study's measurement store: the store and the run get the new figure."""
    from syno_automl.study.trial_speed import MEASURED, SpeedObjective, TrialSpeed, cannot_run

    target = context.resolved.speed.name
    if cannot_run(target):
        return f", speed not measured ({target} cannot run here)"
    speed = TrialSpeed(context, SpeedObjective(MEASURED, target), measure=timed)
    estimate = speed.remeasure(study, run, op)
    return f", speedup {estimate.text()} on {target}" if estimate is not None else f", speed not measured on {target}"


def _recorded_settings(study: Any) -> dict[str, Any]:
    """The study's recorded settings (``syno.settings``), those it predates as they behaved then."""
    from syno_automl.config import with_legacy_settings

    recorded = study.user_attrs.get(V.SETTINGS, {})
    return with_legacy_settings(recorded) if isinstance(recorded, dict) else {}


def _image_size(config: Any) -> str:
    return f" at {config.image_size}x{config.image_size}" if config.task == "image" and config.image_size else ""


def cmd_tune(args: argparse.Namespace) -> int:
    require_cuda([args.target], "--target")   # before TVM and torch load
    from syno_automl import measure
    from syno_automl.cli.text import layer_line, progress_printer, total_line

    if args.tune_trials < 0:
        raise OptionError(f"--tune-trials must be >= 0, got {args.tune_trials}")
    device = measure.device_name(args.target)  # a malformed rpc:KEY@host:port fails here, before any work
    require_tvm([args.target], "--target")
    eager = not measure.needs_tvm(args.target)
    study = load_study(args)
    trial, op = operator_of(study, args.hash)
    n = op.space.num_mappings
    schedules = measure.schedules_label(args.tune_trials, args.seconds, eager=eager)
    print(f"operator {op.hash} (trial {trial.number}) on {args.target}: {n} replaced layer{'s' if n != 1 else ''}, "
          f"{schedules}{'' if args.no_inductor or eager else '; TorchInductor too'}", flush=True)
    # every layer: operator and inferred baseline, same budget and protocol (measure.measure_layers)
    settings = study.user_attrs.get(V.SETTINGS, {})
    batch = args.batch if args.batch is not None else (
        settings.get("seq_len", 64) if settings.get("task") == "lm" else 1)
    request = measure.MeasureRequest(targets=(args.target,), trials=args.tune_trials, seconds=args.seconds,
                                     work_dir=args.work_dir, inductor=not args.no_inductor, protocol=measure.PROTOCOL)
    result = measure.measure_layers(op, request, fail_fast=True, sizes={"N": batch} if batch else None,
                                    progress=progress_printer(quiet=args.quiet))
    summary = result["devices"][device]
    for layer in summary["layers"]:
        print(layer_line(layer, schedules), flush=True)
    if summary["latency_ms"] is None or summary["baseline_ms"] is None:
        notes = result["notes"]
        why = notes.get(V.latency_metric(device)) or notes.get(V.baseline_latency_metric(device)) or "no reason given"
        raise LatencyError(f"no latency on {device} ({schedules}): {why}")
    print(total_line(summary, device))
    entry = measure.stored_entry(summary)
    latencies = dict(study.user_attrs.get(V.LATENCY, {}))  # read again: measuring took a while
    latencies[op.hash] = {**latencies.get(op.hash, {}), device: entry}
    study.set_user_attr(V.LATENCY, latencies)
    print(f"stored syno.latency[{op.hash}][{device}] in study {study.study_name} "
          f"(tuned_trials {entry['tuned_trials']})")
    tracking = tracking_of(args)
    run_id = trial.user_attrs.get(V.RUN_ID)
    if not tracking or not run_id:
        print("MLflow: nothing logged (" + ("--tracking-uri none" if not tracking else
                                            f"trial {trial.number} has no MLflow run") + ")")
        return 0
    from syno_automl.tracking import SearchTracker, log_latency

    run = SearchTracker(tracking).run(run_id)
    try:
        run.client.get_run(run_id)
    except Exception as e:  # noqa: BLE001 -- MLflow raises several types for a missing run
        print(f"MLflow: nothing logged (run {run_id} not found in {tracking}: {type(e).__name__})")
        return 0
    one = {"metrics": result["metrics"], "notes": result["notes"], "devices": {device: summary}}
    logged = log_latency(run, one, {"operator": op.hash, "trial": trial.number, "device": device})
    print(f"logged {', '.join(logged)} and latency/{measure.slug(device)}.json to MLflow run {run_id}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Times operators of the search's own space on this machine and writes the cost profile they fit."""
    from syno_automl.calibrate import calibrate
    from syno_automl.errors import OptionError
    from syno_automl.export import check_output_path

    if args.operators < 2 or args.repeats < 1:
        raise OptionError(f"--operators must be >= 2 and --repeats >= 1, got {args.operators} and {args.repeats}")
    check_output_path(args.out)
    study = None
    if args.from_study:
        study = load_study(args)
        fill_from_recorded(args, _recorded_settings(study))   # the study's space: its operators read in it
    config = config_of(args, tracking_uri=None)
    config.validate()
    quiet_logs(training=True, verbose=args.verbose)

    context = _prepared(config)
    if study is not None:
        from syno_automl.study.measured_profile import profile_from_study

        profile = profile_from_study(study, context, args.target)
        profile.save(Path(args.out))
    else:
        profile = calibrate(context.substitution, args.target, operators=args.operators, seed=config.seed,
                            repeats=args.repeats, progress=not (args.no_progress or args.quiet), out=args.out)
    coefficients = ", ".join(f"{k} {getattr(profile, k):.4g}" for k in ("flop", "element", "read", "launch"))
    print(f"wrote {args.out}: {profile.target} on {profile.device} (torch {profile.torch}), ns per unit: "
          f"{coefficients}; search with --cost-profile {args.out}")
    return 0


def _prepared(config: Any) -> SearchContext:
    """The command's run context, its process set up first (a command is an entry point: runtime.process)."""
    from syno_automl.runtime.process import configure_process
    from syno_automl.study.context import prepare, process_threads

    configure_process(threads=process_threads(config), timing=config.timing)
    return prepare(config)
