"""``syno-automl enumerate`` (the space's counts and canonical rates), ``reevaluate`` (retrain chosen operators)
and ``tune`` (TVM latency against the replaced layers): the commands that measure beyond the search."""
from __future__ import annotations

import argparse
import traceback
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.cli.common import load_study, operator_of, quiet_logs, require_tvm, tracking_of
from syno_automl.cli.options import config_of
from syno_automl.errors import LatencyError, OptionError
from syno_automl.cli.lookup import find_trial

__all__ = ["cmd_enumerate", "cmd_reevaluate", "cmd_tune"]


def cmd_enumerate(args: argparse.Namespace) -> int:
    from syno_automl.report import canonical_rate_table
    from syno_automl.study import prepare

    config = config_of(args, tracking_uri=None)
    quiet_logs(training=True, verbose=args.verbose)
    context = prepare(config)
    space = context.space
    print(f"space: {space.input_shape} -> {space.output_shape}, primary {space.primary}, coefficients "
          f"{space.coefficients}, {space.num_mappings} mappings, max_depth {space.max_depth}, "
          f"budgets {space.budgets}")
    limit = args.time_limit if args.time_limit > 0 else None   # 0: no limit
    e = space.enumerate(time_limit=limit)
    print(f"enumeration: {e.operator_count} operators, stopped by {e.stop_reason} after {e.seconds:.1f} s")
    print("| depth | nodes | final |\n|---:|---:|---:|")
    for d, (n, f) in enumerate(zip(e.nodes_per_depth, e.finals_per_depth)):
        print(f"| {d} | {n} | {f} |")
    ops = space.sample(32, seed=config.seed, time_limit=args.time_limit)
    r = space.last_report
    print(f"sampling: {len(ops)} operators from {r.attempts} random descents "
          f"({len(ops) / max(r.attempts, 1):.1%} reach an operator) in {r.seconds:.1f} s")
    print(canonical_rate_table(space.stats()))
    return 0


def cmd_reevaluate(args: argparse.Namespace) -> int:
    from syno_automl.search.objectives import primary_value
    from syno_automl.search.sampler import operator_json_of
    from syno_automl.space import Operator
    from syno_automl.study import prepare
    from syno_automl.study.training import train_operator

    study = load_study(args)
    # the baseline is retrained at the same budget, first: the operators' new figures are judged against it
    refs = [h for h in args.hashes if h.lower() != "baseline"]
    found: list[tuple[Any, Any]] = [operator_of(study, h) for h in refs]
    if not args.no_baseline:
        found.insert(0, (find_trial(study, "baseline"), None))
    config = config_of(args, tracking_uri=tracking_of(args), study=args.study)
    if args.epochs is None and config.task == "image":  # re-training is longer than a trial by default
        config.epochs = 10
    if args.steps is None and config.task == "lm":
        config.max_steps = 1000
    quiet_logs(training=True, verbose=args.verbose)
    context = prepare(config)
    label, schedule = config.objective_name, context.task.budget_label(config)
    free_space = context.space.with_mappings(context.space.mappings)  # the new model's sizes, no FLOPs budget
    tracker = None
    if config.tracking_uri:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(config.tracking_uri)
    for trial, op in found:
        local = Operator.from_json(free_space, operator_json_of(trial)) if op is not None else None
        name = op.hash if op is not None else "baseline"
        run = None
        if tracker is not None:
            search_run = tracker.find_trial_run(study.study_name, number=trial.number)
            run = tracker.reevaluation_run(study.study_name, local, search_run, trial.number, config.settings())
        try:
            acc = train_operator(context, None, run, epochs=config.epochs, operator=local, milestones={},
                                 timeout=None)
        except Exception as e:
            if run is not None:
                run.log_failure(f"{type(e).__name__}: {e}", traceback.format_exc())
                run.finish("FAILED")
            print(f"{name}: failed: {type(e).__name__}: {e}")
            continue
        if run is not None:
            run.finish("FINISHED")
        print(f"{name}: {label} {acc:.4f} on {config.dataset} after {schedule}"
              + (f" (search trial {trial.number}: {primary_value(trial):.4f})" if primary_value(trial) is not None
                 else "")
              + (f"  [MLflow run {run.run_id}]" if run is not None else ""))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
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
    print(f"stored syno.latency[{op.hash}][{device}] in study {study.study_name} (tuned_trials {entry['tuned_trials']})")
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
    except Exception as e:
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
    config = config_of(args, tracking_uri=None)
    config.validate()
    quiet_logs(training=True, verbose=args.verbose)
    from syno_automl.study import prepare

    context = prepare(config)
    profile = calibrate(context.substitution, args.target, operators=args.operators, seed=config.seed,
                        repeats=args.repeats, progress=not (args.no_progress or args.quiet), out=args.out)
    coefficients = ", ".join(f"{k} {getattr(profile, k):.4g}" for k in ("flop", "element", "read", "launch"))
    print(f"wrote {args.out}: {profile.target} on {profile.device} (torch {profile.torch}), ns per unit: "
          f"{coefficients}; search with --cost-profile {args.out}")
    return 0
