"""``syno-automl search``, ``show`` (and ``list``) and ``export``: run a search, read its trials, write an
operator out."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.cli.common import load_study, operator_of, quiet_logs, require_cuda, require_tvm, tracking_of
from syno_automl.cli.lookup import (
    check_tracking_uri,
    find_trial,
    local_run_summary,
    refuse_existing_study,
    resume_defaults,
    trial_header,
    trial_line,
)
from syno_automl.cli.options import config_of
from syno_automl.cli.preflight import check_writable_stores
from syno_automl.errors import NotFoundError, OptionError
from syno_automl.words import counted

__all__ = ["cmd_search", "cmd_show", "cmd_export"]


def cmd_search(args: argparse.Namespace) -> int:
    # everything that can reject the invocation runs before torch, Lightning and MLflow load (seconds) and
    # before any database is created
    recorded = resume_defaults(args) if args.resume else None   # flags not given take the study's settings
    config = config_of(args)
    if recorded is not None and isinstance(recorded.get("milestones"), dict):  # no flag: the study's own
        config.milestones = {int(k): float(v) for k, v in recorded["milestones"].items()}
    config.validate()
    if config.tracking_uri is not None:
        check_tracking_uri(config.tracking_uri)
    check_writable_stores(config.storage, config.tracking_uri)
    require_cuda(config.latency_targets, "--latency")
    require_tvm(config.latency_targets, "--latency")
    if recorded is not None:  # the same check as run_search's, before the imports
        from syno_automl.config import StudyMismatchError, describe_diff, settings_diff

        diff = settings_diff(recorded, config.settings())
        if diff:
            raise StudyMismatchError(f"study {config.study!r} was trained with other settings: {describe_diff(diff)}; "
                                     f"resume with the study's settings, or --study NAME for a new search")
    else:
        refuse_existing_study(config.storage, config.study)   # a new search: the name is free (run_search's check)
    from syno_automl.runtime.device import check_runnable_here

    # a GPU asked for where torch sees none (imports torch only then, ~3 s): before any study exists
    for warning in check_runnable_here(config.accelerator, config.speed_target, config.also_measure):
        print(f"syno-automl: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print(f"syno-automl: {'resuming' if args.resume else 'starting'} study {config.study!r} "
              f"({config.model} on {config.dataset}); loading torch, Lightning, MLflow...", flush=True)
    quiet_logs(training=True, verbose=args.verbose)
    from syno_automl.search.objectives import (
        baseline_trial,
        best_operator_trial,
        is_pareto,
        objective_name,
        operator_front,
        primary_value,
        speed_ratio_label,
    )
    from syno_automl.study import run_search
    from syno_automl.study.run import SearchFailedError, failure_of

    result = run_search(config, resume=args.resume, out=None if args.quiet else sys.stdout)
    study = result.study
    name = objective_name(study)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    failed = [t for t in study.trials if t.state.name == "FAIL"]
    base = baseline_trial(study)
    print(f"done in {result.seconds:.0f} s: {counted(len(study.trials), 'trials')}, {len(done)} complete, "
          f"{len(pruned)} pruned, "
          f"{len(failed)} failed" + (f"; baseline {name} {primary_value(base):.4f}" if base else ""))
    failure = failure_of(study)
    if failure is not None:  # nothing to compare: say why, and exit non-zero
        raise SearchFailedError(f"the search found nothing to compare: {failure}")
    if is_pareto(study):
        front = operator_front(study)
        label = speed_ratio_label(study)   # "measured time ratio" or "planned cost ratio"
        print(f"Pareto front ({name} vs {label}, study.best_trials): {len(front)} "
              f"operator{'s' if len(front) != 1 else ''}"
              + "".join(f"\n  {t.user_attrs.get(V.HASH)} (trial {t.number}): {name} {t.values[0]:.4f} at "
                        f"{t.values[1]:.3f}x {label.split()[1]}" for t in front))
    best = best_operator_trial(study)
    if best is not None and result.final is None:   # with a final stage, its verdict is the one answer (last)
        print(f"best operator {best.user_attrs.get(V.HASH)} (trial {best.number}): {name} {primary_value(best):.4f} "
              f"at {best.user_attrs.get(V.FLOPS_RATIO, float('nan')):.3f}x FLOPs, "
              f"{best.user_attrs.get(V.COST_RATIO, float('nan')):.3f}x cost  ->  "
              f"syno-automl show {best.user_attrs.get(V.HASH)}")
    if config.tracking_uri:
        print(_mlflow_hint(config.tracking_uri, result.parent_run_id, study, result.context.resolved.speed.name))
    if result.final is not None:  # the search's answer, last
        print(result.final.verdict())
    return 0


def _mlflow_hint(tracking_uri: str, parent: str | None, study: Any, speed_target: str) -> str:
    """How to serve the MLflow store (from its folder) and the address of the study's runs table in its UI, the view
    it opens written on the experiment first (syno_automl.tracking.ui)."""
    from syno_automl.search.objectives import objective_name
    from syno_automl.tracking.store import absolute_tracking_uri
    from syno_automl.tracking.ui import RunsView, ui_hint

    view = RunsView(study.study_name, objective_name(study), maximize=study.directions[0].name == "MAXIMIZE",
                    speed_target=speed_target)
    experiment, shared = None, False
    if parent is not None:
        try:
            from mlflow.tracking import MlflowClient

            client = MlflowClient(absolute_tracking_uri(tracking_uri))
            experiment = client.get_run(parent).info.experiment_id
            shared = view.share(client, experiment)
        except Exception:  # noqa: BLE001 -- a server gone meanwhile: the hint without the address
            experiment = None
    return ui_hint(tracking_uri, experiment, view, shared)


def cmd_show(args: argparse.Namespace) -> int:
    # light: optuna, the study's SQLite file and the native core; no torch, Lightning or (for a local store) MLflow
    from syno_automl.report.final import search_budget
    from syno_automl.search.objectives import objective_name, primary_value
    from syno_automl.study.verdict import stored_final

    study = load_study(args)
    name = objective_name(study)
    final = stored_final(study)
    budget = search_budget(study.user_attrs.get(V.SETTINGS, {}))
    if args.hash is None:
        trials = study.get_trials(deepcopy=False)
        print(f"study {study.study_name}: {counted(len(trials), 'trials')} ({name}; `syno-automl show N` for one)")
        print(_final_headline(study, final, budget))
        print(trial_header(name, final))
        from syno_automl.study.lost_trials import stale_trials
        from syno_automl.study.requeue import retries, retry_note

        stale = stale_trials(study, _grace_seconds(args))   # RUNNING, its worker gone: no heartbeat in the grace
        retried = retries(study)   # interrupted or lost, and queued again with the same operator
        for t in trials:
            print(trial_line(t, name, final, stale=t.number in stale, note=retry_note(t, retried.get(t.number))))
        if final is not None:
            print(f"{name}: the search's ({budget}); final: re-trained mean ± sd ({final.budget_text()})"
                  + ("; * the operator the final stage names" if final.chosen is not None else ""))
        return 0
    trial = find_trial(study, args.hash)
    if trial.user_attrs.get(V.BASELINE):
        print(f"baseline (study {study.study_name}, trial {trial.number}, {trial.state.name}): the original layers")
    else:
        _, op = operator_of(study, f"#{trial.number}")
        print(f"operator {op.hash}  (study {study.study_name}, trial {trial.number}, {trial.state.name})")
        from syno_automl.study.verdict import describe_kind

        print(f"kind: {trial.user_attrs.get(V.OPENING) or describe_kind(op, primitives=False)}")   # known, or new
        print(str(op))  # its primitives, in forward order, with the input and weight shapes
    for key, label, kind in _FIGURES:
        if key in trial.user_attrs:
            print(f"{label}: {_figure(trial.user_attrs[key], kind)}")
    if primary_value(trial) is not None:
        print(f"{name}: {primary_value(trial):.4f} (the search's: {budget})")
    if final is not None:
        mine = final.of_trial(trial.number)
        if mine is not None:
            print(f"final stage: {final.summary(mine)}")
        else:
            print(f"final stage: not a finalist; {final.verdict()}")
        chosen = final.chosen
        if chosen is not None and chosen is not mine:
            print(f"the final stage names {chosen.label} (trial {chosen.trial}): `syno-automl show final`")
    elif not trial.user_attrs.get(V.BASELINE):
        print(_final_headline(study, final, budget))
    for key, label in ((V.TOKENS_PER_S, "training tokens/s"), (V.THROUGHPUT_RATIO, "throughput ratio")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]:.4g}")
    for key, label in ((V.FAILURE, "failure"), (V.PRUNED, "pruned")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]}")
    run_id = trial.user_attrs.get(V.RUN_ID)
    if run_id:
        print(f"MLflow run: {run_id}" + _run_summary(tracking_of(args), run_id))
    return 0


def _grace_seconds(args: argparse.Namespace) -> float:
    """How long a trial may go without a heartbeat before `show` calls it stale: what a --resume with these
    options would wait (storage.make_storage: --grace-period, or 3 heartbeats)."""
    from syno_automl.study.lost_trials import DEFAULT_GRACE_SECONDS

    grace, heartbeat = getattr(args, "grace_period", None), getattr(args, "heartbeat", None)
    return float(grace or (3 * heartbeat if heartbeat else DEFAULT_GRACE_SECONDS))


# the figures `show N` prints, as (user attr, label, kind): ratios with 3 decimals, counts with separators
_FIGURES = ((V.FLOPS_RATIO, "FLOPs ratio", "ratio"), (V.FLOPS, "FLOPs", "count"), (V.PARAMS, "params", "count"),
            (V.COST_RATIO, "cost ratio", "ratio"), (V.COST, "cost", "count"),
            (V.MATERIALIZED, "elements materialized", "count"), (V.PEAK, "peak tensor (elements)", "count"))


def _figure(value: Any, kind: str) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if kind == "ratio":
        return f"{value:.3f}x"
    return f"{value:,.0f}" if abs(value) < 1e15 else f"{value:.3g}"


def _final_headline(study: Any, final: Any, budget: str) -> str:
    """The final stage's verdict, or that there is none (so the search's values are not read as the answer)."""
    if final is not None:
        return f"final stage ({final.budget_text()}, re-trained alike): {final.verdict()}"
    trials = study.user_attrs.get(V.SETTINGS, {}).get("trials")
    again = f"--trials {trials} " if trials is not None else ""
    return (f"no final stage: the values are the search's ({budget}), a screening, not a re-trained comparison "
            f"with the baseline (`syno-automl search --resume {again}--finalists 3` runs it)")


def _run_summary(tracking: str | None, run_id: str) -> str:
    """`` (FINISHED; artifacts: ...)`` read from the tracking store; '' without one. A local store is read
    directly (lookup.local_run_summary); MLflow's client only for the others."""
    if tracking is None:
        return ""
    found = local_run_summary(tracking, run_id)
    if found is not None:
        status, artifacts = found
        return f" ({status}; artifacts: {', '.join(artifacts) or 'none'})"
    from syno_automl.tracking import SearchTracker

    tracker = SearchTracker(tracking)
    try:
        run = tracker.client.get_run(run_id)
        artifacts = sorted(a.path for a in tracker.run(run_id).artifacts().list_artifacts())
    except Exception as e:  # noqa: BLE001 -- another store, or a deleted run: say so, show the rest
        return f" (not found in {tracking}: {type(e).__name__})"
    return f" ({run.info.status}; artifacts: {', '.join(artifacts) or 'none'})"


def cmd_export(args: argparse.Namespace) -> int:
    from syno_automl.export import check_output_path, layer_source, weights_for_mapping, write_output

    for path in (args.output, args.weights):  # a missing folder is said before anything is read
        if path:
            check_output_path(path)
    study = load_study(args)
    trial, op = operator_of(study, args.hash)
    if not 0 <= args.mapping < op.space.num_mappings:
        raise OptionError(f"--mapping must be in [0, {op.space.num_mappings - 1}]")
    mapping = op.space.mapping(args.mapping)
    kind = study.user_attrs.get(V.SETTINGS, {}).get("layer", "conv2d")
    state = None
    if args.weights:
        tracking = tracking_of(args)
        run_id = trial.user_attrs.get(V.RUN_ID)
        if tracking is None or not run_id:
            raise NotFoundError(f"--weights: trial {trial.number} has no MLflow run" if tracking else
                              "--weights reads the trained weights from MLflow: --tracking-uri none was given")
        state = weights_for_mapping(_download_weights(tracking, run_id, trial.number), mapping)
    bias = not args.no_bias if state is None else "bias" in state
    source = layer_source(op, args.mapping, kind=kind, bias=bias)
    if args.output:
        write_output(args.output, source)
        print(f"wrote {args.output} (operator {op.hash}, trial {trial.number}, sizes {mapping}; "
              f"`python {args.output}` smoke-tests it)")
    else:
        sys.stdout.write(source)
    if state is not None:
        import torch

        torch.save(state, args.weights)
        print(f"wrote {args.weights} (trained weights: SynoLayer().load_state_dict(torch.load({args.weights!r})))",
              file=sys.stderr if not args.output else sys.stdout)
    print(_export_figures(study, trial), file=sys.stderr if not args.output else sys.stdout)
    return 0


def _export_figures(study: Any, trial: Any) -> str:
    """What is known of the exported operator beyond the search: its final-stage figures, or that it has none."""
    from syno_automl.study.verdict import stored_final

    final = stored_final(study)
    if final is None:
        return "no final stage: its accuracy is the search's one-seed figure (see `syno-automl show`)"
    mine = final.of_trial(trial.number)
    text = f"final stage: {final.summary(mine)}" if mine is not None else "final stage: not a finalist"
    chosen = final.chosen
    if chosen is not None and chosen is not mine:
        text += f"; the final stage names {chosen.label} (`syno-automl export final`)"
    return text


def _download_weights(tracking: str, run_id: str, number: int) -> dict[str, Any]:
    import tempfile

    import torch

    from syno_automl.tracking import SearchTracker

    run = SearchTracker(tracking).run(run_id)
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = run.artifacts().download_artifacts(V.ARTIFACT_WEIGHTS, folder)
        except Exception as e:  # noqa: BLE001 -- MLflow raises several types for a missing artifact
            raise NotFoundError(f"trial {number}'s MLflow run {run_id} has no {V.ARTIFACT_WEIGHTS} (trials that "
                              f"did not complete, or searched before weights were kept): {type(e).__name__}") from None
        return torch.load(path, weights_only=True)
