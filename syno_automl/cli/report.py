"""``syno-automl report``: the final stage's verdict first (table and figure), then the search's Pareto plots, the
front, the trial, re-evaluation and latency tables (and, with ``--rates N``, the canonical-rate table), written to a
folder and logged to the study's MLflow run."""
from __future__ import annotations

import argparse
from pathlib import Path

from syno_automl import vocabulary as V
from syno_automl.cli.common import load_study, space_of, tracking_of
from syno_automl.errors import OutputPathError

__all__ = ["cmd_report"]


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    # before the study is read, in words (mkdir would say "[Errno 17] File exists" or "[Errno 20] Not a directory")
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))   # the nearest that exists
    if not existing.is_dir():
        raise OutputPathError(f"--out {args.out}: {'it' if existing == out else existing} is a file, and the report "
                              f"is a folder (report.md and its figures): name a new or existing folder")
    from syno_automl.report import (
        CostAxis,
        canonical_rate_table,
        latency_devices,
        latency_schedules,
        latency_series,
        latency_table,
        plot_pareto,
        points_of,
        reevaluation_series,
        reevaluation_table,
        reevaluations_of,
        search_label,
        trial_table,
    )
    from syno_automl.report.final import final_series, plot_final, verdict_section
    from syno_automl.search.objectives import objective_name
    from syno_automl.study.verdict import stored_final

    study = load_study(args)
    out.mkdir(parents=True, exist_ok=True)
    name = objective_name(study)
    maximize = name == "val_acc"
    axis = {"maximize": maximize, "ylabel": "validation accuracy" if maximize else "validation loss"}
    points = points_of(study)
    settings = study.user_attrs.get(V.SETTINGS, {})
    final = stored_final(study)
    files = []
    figure = "final.png" if final is not None and final.candidates else None
    if final is not None and figure is not None:  # the answer first: re-trained alike, against the baseline's band
        files += plot_final(final, out / "final", title=f"{study.study_name}: the final stage's verdict "
                                                        f"({final.budget_text()})")
    tracking = tracking_of(args)
    tracker = None
    if tracking:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(tracking)
    # `reevaluate` keeps its figures in MLflow runs only; `tune` in the study attr syno.latency
    reevaluated = reevaluations_of(tracker.reevaluation_runs(study.study_name), study, name) if tracker else []
    files += plot_pareto(points, out / "pareto_flops", title=f"{study.study_name}: {name} vs FLOPs",
                         cost_axis=CostAxis(budget=settings.get("flops_ratio")),
                         label=f"operators ({search_label(settings)})",
                         series=[*final_series(study, final, V.FLOPS_RATIO), *reevaluation_series(reevaluated)],
                         **axis)
    from syno_automl.report.front import front_table, plot_cost_front
    from syno_automl.search.objectives import speed_ratio_label, speed_ratio_of

    ratio_label = speed_ratio_label(study) or "planned cost ratio"
    at_ratio = final_series(study, final, x_of=lambda t: speed_ratio_of(study, t))
    files += plot_cost_front(study, out / "pareto_cost", series=at_ratio, **axis)
    for device in latency_devices(study):  # measured by the search or by `syno-automl tune`, side by side
        series = latency_series(study, device)
        if series:
            files += plot_pareto(list(series[0].points), out / f"pareto_latency_{device}", label=series[0].label,
                                 series=series[1:],
                                 cost_axis=CostAxis(f"latency of the replaced layers (ms) on {device}"),
                                 title=f"{study.study_name}: {name} vs latency ({device}; "
                                       f"{'; '.join(latency_schedules(study, device))})", **axis)
    if not maximize:
        if tracking:
            files += _loss_curves(study, tracking, out, args.top)
        else:
            print("no loss curves: they are read from MLflow (--tracking-uri none was given)")
    if args.rates > 0:  # sampling exercises the canonical rules so that their counters mean something: seconds
        space = space_of(study)
        space.sample(args.rates, seed=0, time_limit=30.0)
        rates = (f"Children kept by the canonical rules, per depth, over {args.rates} samples of the space.\n\n"
                 + canonical_rate_table(space.stats()))
    else:
        rates = ("Not computed: the canonical rate per depth needs the space sampled (seconds to a minute): "
                 "`syno-automl report --rates 32`, or `syno-automl enumerate` for the default space.")
    later = (reevaluation_table(reevaluated, study, name) if tracker else
             "Not read: re-evaluations are kept in MLflow runs (--tracking-uri none was given).")
    text = (f"# syno-automl report: study {study.study_name}\n\n"
            f"{verdict_section(study, final, name, figure)}\n"
            f"## Trials (the search's figures)\n\n{trial_table(study)}\n\n"
            f"## Pareto front of the search ({name} vs {ratio_label}; pareto_cost.png)\n\n{front_table(study)}\n\n"
            f"## Re-evaluated (`syno-automl reevaluate`, beside the search's figures)\n\n{later}\n\n"
            f"## Latency (measured by the search and by `syno-automl tune`)\n\n{latency_table(study)}\n\n"
            f"## Canonical rates\n\n{rates}\n")
    (out / "report.md").write_text(text)
    files.append(out / "report.md")
    print(text)
    run_id = study.user_attrs.get(V.RUN_ID)
    if tracker is not None and run_id:
        run = tracker.run(run_id)
        for f in files:
            run.log_file(f, "report")
        print(f"logged {len(files)} files to MLflow run {run_id}")
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def _loss_curves(study, tracking: str, out: Path, top: int) -> list[Path]:
    """Loss-vs-step curves of the baseline and the `top` best operators, from their MLflow runs."""
    import optuna

    from syno_automl.report import plot_loss_curves
    from syno_automl.search.objectives import primary_value
    from syno_automl.tracking import SearchTracker

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if primary_value(t) is not None and V.RUN_ID in t.user_attrs]
    base = [t for t in done if t.user_attrs.get(V.BASELINE)]
    value = {t.number: v for t in done if (v := primary_value(t)) is not None}  # each trial of done has one
    ops = sorted((t for t in done if not t.user_attrs.get(V.BASELINE)), key=lambda t: value[t.number])[:top]
    client = SearchTracker(tracking).client
    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for t in base + ops:
        label = "baseline" if t.user_attrs.get(V.BASELINE) else str(t.user_attrs.get(V.HASH, t.number))[:8]
        run_id = t.user_attrs[V.RUN_ID]
        curves[label] = {m: [(p.step, p.value) for p in client.get_metric_history(run_id, m)]
                         for m in ("train_loss", "val_loss")}
    if not any(series.get("val_loss") for series in curves.values()):
        print("no loss curves: no completed trial has a val_loss history in MLflow")
        return []
    return plot_loss_curves(curves, out / "loss_curves", title=f"{study.study_name}: loss vs step "
                                                               f"(baseline and the {len(ops)} best operators)")
