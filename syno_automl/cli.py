"""``syno-automl``: search, inspect, export, report, enumerate, re-evaluate and tune synthesized operators.

    syno-automl search                      # embedded default: digits, small CNN, 10 trials, syno.db + mlflow.db
    syno-automl search --resume --trials 20 # continue the study
    syno-automl show 3f2a                   # an operator of the study (hash prefix)
    syno-automl export 3f2a -o op.py        # standalone PyTorch module
    syno-automl report                      # Pareto plot (PNG/SVG, logged to MLflow) and canonical-rate table
    syno-automl enumerate                   # counts and canonical rates of the default space
    syno-automl reevaluate 3f2a --epochs 10 # retrain chosen operators, each an MLflow run linked to its trial
    syno-automl tune 3f2a --target llvm     # TVM latency vs the replaced layers

Errors are one line (``syno-automl: error: ...``); ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _quiet(training: bool = False) -> None:
    """Keeps the terminal for progress lines: libraries' info chatter goes."""
    if training:
        import lightning.pytorch  # noqa: F401 - it sets its loggers' levels on import: override them after

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "mlflow",
                 "alembic", "optuna"):
        logging.getLogger(name).setLevel(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*experimental feature.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default="sqlite:///syno.db",
                   help="Optuna storage: sqlite:///syno.db, postgresql://..., or journal:PATH (default: %(default)s)")
    p.add_argument("--study", default="syno", help="study name (default: %(default)s)")
    p.add_argument("--tracking-uri", default="sqlite:///mlflow.db",
                   help="MLflow tracking URI, or 'none' (default: %(default)s, artifacts under ./mlruns)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _model_options(p: argparse.ArgumentParser, trials: bool = True) -> None:
    p.add_argument("--model", default="small_cnn", help="model of lightning_modules (default: %(default)s)")
    p.add_argument("--dataset", default="digits",
                   help="digits (embedded), mnist, cifar10, cifar100, imagenet-folder (default: %(default)s)")
    p.add_argument("--data-dir", default=None, help="folder of a local dataset (not digits)")
    p.add_argument("--epochs", type=int, default=None, help="training epochs per trial")
    p.add_argument("--flops-ratio", type=float, default=0.5,
                   help="FLOPs budget relative to the replaced layers (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="search seed (default: %(default)s)")
    p.add_argument("--image-size", type=int, default=None, help="image side (default: the dataset's)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: 0.05)")
    p.add_argument("--max-depth", type=int, default=None, help="maximum primitives per operator (default: 8)")
    if trials:
        p.add_argument("--trials", type=int, default=10, help="operator trials, beside the baseline (default: %(default)s)")
        p.add_argument("--timeout", type=float, default=None,
                       help="seconds of training per trial, projected after 2 steps; over it the trial fails; 0: no limit "
                            "(default: 60)")
        p.add_argument("--threads", type=int, default=None,
                       help="torch threads (default: 1 for digits, else torch's default)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="syno-automl", description="Synthesize neural operators with Optuna + MLflow.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("search", help="run (or --resume) a search")
    _model_options(p)
    _common(p)
    p.add_argument("--resume", action="store_true", help="continue an existing study")
    p.add_argument("--heartbeat", type=int, default=10,
                   help="seconds between worker heartbeats (RDB storages); a trial silent for 3x this is failed "
                        "and retried with its operator (default: %(default)s; 0: off)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("show", help="describe an operator of the study")
    p.add_argument("hash", help="operator hash (a unique prefix is enough)")
    _common(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="write an operator as a standalone PyTorch module")
    p.add_argument("hash")
    p.add_argument("-o", "--output", default=None, help="file to write (default: stdout)")
    p.add_argument("--mapping", type=int, default=0, help="which replaced layer's sizes (default: %(default)s)")
    _common(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("report", help="Pareto plot and canonical-rate table")
    p.add_argument("--out", default="report", help="output folder (default: %(default)s)")
    _common(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("enumerate", help="counts and canonical rates of the (default) space")
    _model_options(p, trials=False)
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds (default: %(default)s)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(func=cmd_enumerate)

    p = sub.add_parser("reevaluate", help="retrain chosen operators (e.g. longer, bigger dataset)")
    p.add_argument("hashes", nargs="+", metavar="HASH")
    _model_options(p, trials=False)
    _common(p)
    p.set_defaults(func=cmd_reevaluate)

    p = sub.add_parser("tune", help="TVM latency of an operator vs the layers it replaces")
    p.add_argument("hash")
    p.add_argument("--target", default="llvm", help="llvm, cuda or rpc:KEY@host:port (default: %(default)s)")
    p.add_argument("--tune-trials", type=int, default=0, help="MetaSchedule trials (0: default schedule)")
    p.add_argument("--seconds", type=float, default=None, help="tuning time budget per kernel")
    _common(p)
    p.set_defaults(func=cmd_tune)
    return parser


# -- helpers ---------------------------------------------------------------------------------------------
def _tracking(args: argparse.Namespace) -> str | None:
    return None if str(args.tracking_uri).lower() in ("none", "", "off") else args.tracking_uri


def _config(args: argparse.Namespace, **extra: Any):
    from syno_automl.study import SearchConfig

    config = SearchConfig(model=args.model, dataset=args.dataset, data_dir=args.data_dir,
                          flops_ratio=args.flops_ratio, seed=args.seed, **extra)
    for name, attr in (("epochs", "epochs"), ("image_size", "image_size"), ("lr", "lr"),
                       ("max_depth", "max_depth"), ("timeout", "trial_timeout"), ("threads", "threads")):
        value = getattr(args, name, None)
        if value is not None:
            setattr(config, attr, value)
    if getattr(args, "timeout", None) == 0:
        config.trial_timeout = None
    return config


def _load_study(args: argparse.Namespace):
    import optuna

    from syno_automl.search.storage import make_storage

    url = args.storage
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise FileNotFoundError(f"no study database {url[len('sqlite:///'):]} here: run `syno-automl search` "
                                f"first, or pass --storage")
    storage = make_storage(url, heartbeat_interval=None)
    try:
        return optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        raise LookupError(f"no study {args.study!r} in {url}") from None


def _space_of(study):
    from syno_automl.space import OperatorSpace

    config = study.user_attrs.get("syno.space")
    if not isinstance(config, dict):
        raise LookupError(f"study {study.study_name!r} was not made by syno-automl (no syno.space attribute)")
    return OperatorSpace(**config)


def _find(study, prefix: str):
    """(trial, Operator) for a hash prefix."""
    from syno_automl.optuna import operator_json_of
    from syno_automl.space import Operator

    prefix = prefix.lower()
    matches: dict[str, Any] = {}
    for t in study.get_trials(deepcopy=False):
        h = t.user_attrs.get("syno.hash")
        if isinstance(h, str) and h.startswith(prefix):
            best = matches.get(h)
            if best is None or (t.state.name == "COMPLETE" and best.state.name != "COMPLETE"):
                matches[h] = t
    if not matches:
        raise LookupError(f"no operator {prefix!r} in study {study.study_name!r}")
    if len(matches) > 1:
        raise LookupError(f"hash prefix {prefix!r} is ambiguous: {', '.join(sorted(matches))}")
    trial = next(iter(matches.values()))
    return trial, Operator.from_json(_space_of(study), operator_json_of(trial))


# -- commands --------------------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    if args.trials < 0:
        raise ValueError(f"--trials must be >= 0, got {args.trials}")
    _quiet(training=True)
    from syno_automl.study import run_search

    config = _config(args, trials=args.trials, storage=args.storage, study=args.study,
                     tracking_uri=_tracking(args), heartbeat=args.heartbeat or None)
    if args.epochs is None:
        config.epochs = 3
    result = run_search(config, resume=args.resume, out=None if args.quiet else sys.stdout)
    study = result.study
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    base = next((t for t in done if t.user_attrs.get("syno.baseline")), None)
    ops = [t for t in done if not t.user_attrs.get("syno.baseline")]
    print(f"done in {result.seconds:.0f} s: {len(study.trials)} trials, {len(done)} complete"
          + (f"; baseline val_acc {base.value:.4f}" if base else ""))
    if ops:
        best = max(ops, key=lambda t: t.value)
        print(f"best operator {best.user_attrs.get('syno.hash')} (trial {best.number}): val_acc {best.value:.4f} "
              f"at {best.user_attrs.get('syno.flops_ratio', float('nan')):.3f}x FLOPs  ->  "
              f"syno-automl show {best.user_attrs.get('syno.hash')}")
    if config.tracking_uri:
        print(f"MLflow: mlflow ui --backend-store-uri {config.tracking_uri} --host 127.0.0.1")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    study = _load_study(args)
    trial, op = _find(study, args.hash)
    print(f"operator {op.hash}  (study {study.study_name}, trial {trial.number}, {trial.state.name})")
    print(str(op))
    print(f"depth {op.depth}; primitives: {', '.join(op.primitives)}")
    for key, label in (("syno.flops_ratio", "FLOPs ratio"), ("syno.flops", "FLOPs"), ("syno.params", "params")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]}")
    if trial.value is not None:
        print(f"val_acc: {trial.value:.4f}")
    if "syno.failure" in trial.user_attrs:
        print(f"failure: {trial.user_attrs['syno.failure']}")
    if "syno.mlflow_run_id" in trial.user_attrs:
        print(f"MLflow run: {trial.user_attrs['syno.mlflow_run_id']}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    study = _load_study(args)
    _, op = _find(study, args.hash)
    if not 0 <= args.mapping < op.space.num_mappings:
        raise ValueError(f"--mapping must be in [0, {op.space.num_mappings - 1}]")
    source = op.to_source(args.mapping)
    if args.output:
        Path(args.output).write_text(source)
        print(f"wrote {args.output} (operator {op.hash}, sizes {op.space.mapping(args.mapping)})")
    else:
        sys.stdout.write(source)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from syno_automl.report import canonical_rate_table, latency_points, plot_pareto, points_of, trial_table

    study = _load_study(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    points = points_of(study)
    files = plot_pareto(points, out / "pareto_flops", title=f"{study.study_name}: accuracy vs FLOPs")
    devices = sorted({d for entry in study.user_attrs.get("syno.latency", {}).values() for d in entry})
    for device in devices:  # measured by `syno-automl tune`
        files += plot_pareto(latency_points(study, device), out / f"pareto_latency_{device}",
                             xlabel=f"latency of the replaced layers (ms) on {device}",
                             title=f"{study.study_name}: accuracy vs latency ({device})")
    space = _space_of(study)
    space.sample(32, seed=0, time_limit=30.0)  # exercise the rules so the counters mean something
    rates = canonical_rate_table(space.stats())
    text = (f"# syno-automl report: study {study.study_name}\n\n## Trials\n\n{trial_table(study)}\n\n"
            f"## Canonical rates (children kept by the canonical rules, per depth; 32 samples)\n\n{rates}\n")
    (out / "report.md").write_text(text)
    files.append(out / "report.md")
    print(text)
    tracking = _tracking(args)
    run_id = study.user_attrs.get("syno.mlflow_run_id")
    if tracking and run_id:
        from syno_automl.tracking import SearchTracker

        client = SearchTracker(tracking).client
        for f in files:
            client.log_artifact(run_id, str(f), artifact_path="report")
        print(f"logged {len(files)} files to MLflow run {run_id}")
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def cmd_enumerate(args: argparse.Namespace) -> int:
    from syno_automl.report import canonical_rate_table
    from syno_automl.study import prepare

    config = _config(args, tracking_uri=None)
    _quiet(training=True)
    context = prepare(config)
    space = context.space
    print(f"space: {space.input_shape} -> {space.output_shape}, primary {space.primary}, coefficients "
          f"{space.coefficients}, {space.num_mappings} mappings, max_depth {space.max_depth}, "
          f"budgets {space.budgets}")
    e = space.enumerate(time_limit=args.time_limit)
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
    from syno_automl.space import Operator
    from syno_automl.optuna import operator_json_of
    from syno_automl.study import prepare, train_operator

    study = _load_study(args)
    found = [_find(study, h) for h in args.hashes]
    config = _config(args, tracking_uri=_tracking(args), study=args.study)
    if args.epochs is None:
        config.epochs = 10
    _quiet(training=True)
    context = prepare(config)
    free_space = context.space.with_mappings(context.space.mappings)  # the new model's sizes, no FLOPs budget
    tracker = None
    if config.tracking_uri:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(config.tracking_uri)
    for trial, op in found:
        local = Operator.from_json(free_space, operator_json_of(trial))
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
            print(f"{op.hash}: failed: {type(e).__name__}: {e}")
            continue
        if run is not None:
            run.finish("FINISHED")
        print(f"{op.hash}: val_acc {acc:.4f} on {config.dataset} after {config.epochs} epochs"
              + (f" (search trial {trial.number}: {trial.value:.4f})" if trial.value is not None else "")
              + (f"  [MLflow run {run.run_id}]" if run is not None else ""))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    try:
        from syno_automl import latency
    except ImportError as e:
        raise RuntimeError(f"syno_automl.latency is not available: {e}") from None
    study = _load_study(args)
    trial, op = _find(study, args.hash)
    space = op.space
    device = "".join(c if c.isalnum() else "_" for c in args.target.split("@")[0])
    total_op = total_base = 0.0
    for i in range(space.num_mappings):
        m = space.mapping(i)
        if "H" in m:
            base = latency.conv2d_nchw_te(m["N"], m["C_in"], m["C_out"], m["H"], m["W"], m.get("k", 3))
        else:
            base = latency.dense_te(m["N"], m["C_in"], m["C_out"])
        result = latency.compare(op.program(i), base, target=args.target, trials=args.tune_trials,
                                 seconds=args.seconds)
        o, b = result["operator"], result["baseline"]
        if not (o.ok and b.ok):
            raise RuntimeError(f"latency of layer {i} failed: operator: {o.note}; baseline: {b.note}")
        print(f"layer {i} {m}: operator {o.median_ms:.4f} ms, replaced layer {b.median_ms:.4f} ms "
              f"({b.median_ms / o.median_ms:.2f}x)")
        total_op += o.median_ms
        total_base += b.median_ms
    speedup = total_base / total_op
    print(f"operator {op.hash} on {args.target}: {total_op:.4f} ms vs {total_base:.4f} ms -> speedup {speedup:.2f}x")
    latencies = dict(study.user_attrs.get("syno.latency", {}))
    latencies.setdefault(op.hash, {})[device] = {"latency_ms": total_op, "baseline_ms": total_base,
                                                 "speedup": speedup}
    study.set_user_attr("syno.latency", latencies)
    tracking = _tracking(args)
    run_id = trial.user_attrs.get("syno.mlflow_run_id")
    if tracking and run_id:
        from syno_automl.tracking import SearchTracker

        SearchTracker(tracking).run(run_id).log_metrics({f"latency_ms.{device}": total_op,
                                                         f"speedup.{device}": speedup,
                                                         f"baseline_latency_ms.{device}": total_base})
        print(f"logged latency_ms.{device} and speedup.{device} to MLflow run {run_id}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _quiet()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("syno-automl: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one clear line; --debug for the traceback
        if getattr(args, "debug", False):
            traceback.print_exc()
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"syno-automl: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
