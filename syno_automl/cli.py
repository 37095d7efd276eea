"""``syno-automl``: search, inspect, export, report, enumerate, re-evaluate and tune synthesized operators.

    syno-automl search                      # embedded default: digits, small CNN, 10 trials, syno.db + mlflow.db;
                                            # (val_acc, cost ratio) Pareto study, Hyperband over the epochs
    syno-automl search --objective accuracy --pruner none   # single-objective, no multi-fidelity pruning
    syno-automl search --resume --trials 20 # continue the study
    syno-automl search --task lm --study lm # GPT QKV projections on the embedded text corpus, val_loss
    syno-automl show 3f2a                   # an operator of the study (hash prefix)
    syno-automl export 3f2a -o op.py        # standalone PyTorch module
    syno-automl report                      # Pareto plots (cost, FLOPs; PNG/SVG, logged to MLflow), the front, tables
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

from syno_automl import vocabulary as V
from syno_automl.lookup import (check_tracking_uri, existing_storage, find_operator, find_trial, resume_defaults,
                                trial_line)

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _quiet(training: bool = False, verbose: bool = False) -> None:
    """Keeps the terminal for progress lines: libraries' info chatter goes (unless -v)."""
    if training:
        import lightning.pytorch  # noqa: F401 - it sets its loggers' levels on import: override them after

    level = logging.INFO if verbose else logging.WARNING
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning", "mlflow",
                 "alembic", "optuna", "syno_automl"):
        logging.getLogger(name).setLevel(level)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.INFO if verbose else optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*experimental feature.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")


def _verbosity(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines, warnings and errors only")
    p.add_argument("-v", "--verbose", action="store_true", help="the libraries' info logs too (Optuna, MLflow...)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default="sqlite:///syno.db",
                   help="Optuna storage: sqlite:///syno.db, postgresql://..., or journal:PATH (default: %(default)s)")
    p.add_argument("--study", default="syno", help="study name (default: %(default)s)")
    p.add_argument("--tracking-uri", default="sqlite:///mlflow.db",
                   help="MLflow tracking URI, or 'none' (default: %(default)s, artifacts under ./mlruns)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _model_options(p: argparse.ArgumentParser, trials: bool = True) -> None:
    p.add_argument("--task", choices=["image", "lm"], default=None,
                   help="image: classification, maximize val_acc (default); lm: the GPT's QKV projections, "
                        "minimize val_loss")
    p.add_argument("--model", default=None, help="model of lightning_modules (default: small_cnn; lm: gpt)")
    p.add_argument("--dataset", default=None,
                   help="digits (embedded, the default), mnist, cifar10, cifar100, imagenet-folder; lm: text "
                        "(the embedded corpus: the Python standard library's sources)")
    p.add_argument("--data-dir", default=None, help="folder of a local dataset (not digits; lm: text files)")
    p.add_argument("--epochs", type=int, default=None, help="training epochs per trial (image)")
    p.add_argument("--steps", type=int, default=None, help="lm: training steps per trial (default: 200)")
    p.add_argument("--time-budget", type=float, default=None,
                   help="lm: seconds of training per trial; at the budget training stops and the model is "
                        "validated (default: 60; 0: none)")
    p.add_argument("--seq-len", type=int, default=None, help="lm: tokens per sequence (default: 64)")
    p.add_argument("--val-every", type=int, default=None, help="lm: validate every N steps (default: 50)")
    p.add_argument("--tokenizer", default=None,
                   help="lm: byte (vocabulary 256, the default), char, or tiktoken:NAME where installed")
    p.add_argument("--flops-ratio", type=float, default=None,
                   help="FLOPs budget relative to the replaced layers (default: 0.5)")
    p.add_argument("--seed", type=int, default=None, help="search seed (default: 0)")
    p.add_argument("--cost-ratio", type=float, default=None,
                   help="planned-cost budget (FLOPs + elements materialized, Operator.cost) relative to the "
                        "replaced layers; 0 turns it off (default: 1.0)")
    p.add_argument("--image-size", type=int, default=None, help="image side (default: the dataset's)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: 0.05 SGD; lm: 3e-3 AdamW)")
    p.add_argument("--max-depth", type=int, default=None, help="maximum primitives per operator (default: 8)")
    if trials:
        p.add_argument("--trials", type=int, default=10, help="operator trials, beside the baseline (default: %(default)s)")
        p.add_argument("--timeout", type=float, default=None,
                       help="safety net: a trial fails when its step takes over 100x the baseline model's (CPU time, in "
                            "the same process), or when it runs 3x over its own projection and past this many "
                            "seconds; 0: no limit (default: 60)")
        p.add_argument("--threads", type=int, default=None,
                       help="torch threads (default: 1 for digits, else torch's default)")


def build_parser() -> argparse.ArgumentParser:
    from syno_automl import __version__

    parser = _Parser(prog="syno-automl", description="Synthesize neural operators with Optuna + MLflow.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("search", help="run (or --resume) a search")
    _model_options(p)
    _common(p)
    p.add_argument("--resume", action="store_true",
                   help="continue an existing study with its settings (options given must agree with them)")
    p.add_argument("--heartbeat", type=int, default=10,
                   help="seconds between worker heartbeats (RDB storages); a trial silent for 3x this is failed "
                        "and retried with its operator (default: %(default)s; 0: off)")
    p.add_argument("--latency", default="", metavar="TARGETS",
                   help="TVM latency of each trial's operator vs the replaced layers on these targets, e.g. llvm or "
                        "llvm,cuda or rpc:KEY@host:port, or torch (eager PyTorch, no TVM needed) (default: none)")
    p.add_argument("--latency-trials", type=int, default=0,
                   help="MetaSchedule trials per kernel for --latency (default: %(default)s = untuned default "
                        "schedules, labelled so)")
    p.add_argument("--latency-margin", type=float, default=0.01,
                   help="measure only trials within this margin of the baseline's value (paper Algorithm 1); "
                        "negative: every trial (default: %(default)s)")
    p.add_argument("--latency-inductor", action="store_true", help="also time both under torch.compile")
    p.add_argument("--objective", choices=["pareto", "accuracy"], default=None,
                   help="pareto: two objectives, accuracy (lm: loss) and the operator's planned cost ratio, the "
                        "front in study.best_trials; accuracy: accuracy (lm: loss) alone (default: pareto)")
    p.add_argument("--pruner", choices=["hyperband", "halving", "none"], default=None,
                   help="image: stop trials that learn slower than the others, after each epoch, with Optuna's "
                        "HyperbandPruner or SuccessiveHalvingPruner (default: hyperband)")
    p.add_argument("--finalists", type=int, default=3,
                   help="final stage: re-train this many operators cheaper than the replaced layers (best first) and "
                        "the baseline alike, time the whole models, and name the fastest within --final-margin of "
                        "the baseline (image task; default: %(default)s; 0: no final stage)")
    p.add_argument("--final-epochs", type=int, default=None,
                   help="final stage: training epochs (default: twice --epochs)")
    p.add_argument("--final-seeds", type=int, default=3,
                   help="final stage: training seeds per model, reported as mean ± sd (default: %(default)s)")
    p.add_argument("--final-margin", type=float, default=0.01,
                   help="final stage: the accuracy an operator may lose against the baseline, absolute "
                        "(default: %(default)s = 1 pp)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("show", help="list the study's trials, or describe one")
    p.add_argument("hash", nargs="?", default=None, metavar="TRIAL",
                   help="best, baseline, a trial number, or an operator hash (a unique prefix is enough); "
                        "none: list the trials")
    _common(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("list", help="the study's trials: number, state, operator, value, FLOPs, reason")
    _common(p)
    p.set_defaults(func=cmd_show, hash=None)

    p = sub.add_parser("export", help="write an operator as a drop-in PyTorch layer (standalone file, torch only)")
    p.add_argument("hash", metavar="TRIAL", help="best, a trial number, or an operator hash prefix")
    p.add_argument("-o", "--output", default=None, help="file to write (default: stdout)")
    p.add_argument("--mapping", type=int, default=0, help="which replaced layer's sizes (default: %(default)s)")
    p.add_argument("--weights", default=None, metavar="FILE",
                   help="also write the trial's trained weights for that layer (from its MLflow run) to FILE, "
                        "for SynoLayer().load_state_dict(torch.load(FILE))")
    p.add_argument("--no-bias", action="store_true",
                   help="no per-channel bias (the search adds one where the replaced layer had one)")
    _common(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("report", help="Pareto plot and canonical-rate table")
    p.add_argument("--out", default="report", help="output folder (default: %(default)s)")
    p.add_argument("--top", type=int, default=3, help="lm: loss curves of this many best operators (default: 3)")
    _common(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("enumerate", help="counts and canonical rates of the (default) space")
    _model_options(p, trials=False)
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds (default: %(default)s)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(func=cmd_enumerate)

    p = sub.add_parser("reevaluate", help="retrain chosen operators (e.g. longer, bigger dataset)")
    p.add_argument("hashes", nargs="+", metavar="TRIAL", help="best, trial numbers or operator hash prefixes")
    p.add_argument("--no-baseline", action="store_true",
                   help="do not retrain the baseline (by default it is retrained first, at the same budget)")
    _model_options(p, trials=False)
    _common(p)
    p.set_defaults(func=cmd_reevaluate)

    p = sub.add_parser("tune", help="TVM latency of an operator vs the layers it replaces")
    p.add_argument("hash")
    p.add_argument("--target", default="llvm",
                   help="llvm, cuda, rpc:KEY@host:port or torch (eager PyTorch, no TVM) (default: %(default)s)")
    p.add_argument("--tune-trials", type=int, default=32,
                   help="MetaSchedule trials per kernel, the same for the operator and the replaced layer "
                        "(default: %(default)s, a small but real budget: a few minutes per layer on a CPU; "
                        "0: untuned default schedules, labelled as such and stored with tuned_trials 0)")
    p.add_argument("--seconds", type=float, default=None, help="tuning time budget per kernel (default: none)")
    p.add_argument("--no-inductor", action="store_true", help="do not time the TorchInductor versions")
    p.add_argument("--batch", type=int, default=None,
                   help="N of the timed layers: 1 (an image) or one sequence's tokens (lm) by default, as the "
                        "paper's inference latencies; 0: the training batch the sizes were recorded with")
    p.add_argument("--work-dir", default=None,
                   help="MetaSchedule database folder, reused across runs (default: $SYNO_TVM_WORK_DIR or "
                        "./.tvm_tuning)")
    _common(p)
    p.set_defaults(func=cmd_tune)
    for command in sub.choices.values():
        _verbosity(command)
    return parser


# -- helpers ---------------------------------------------------------------------------------------------
def _require_tvm(targets: Sequence[str], flag: str) -> None:
    """Fail at once, with the install hint, when a target needs TVM and TVM cannot be imported."""
    from syno_automl.measure import TVM_HINT, needs_tvm

    wanting = [t for t in targets if needs_tvm(t)]
    if not wanting:
        return
    try:
        import tvm  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{flag} {','.join(wanting)} needs TVM, which cannot be imported ({e}): {TVM_HINT} "
                          f"(or {flag} torch: eager PyTorch, no TVM)") from None


def _tracking(args: argparse.Namespace) -> str | None:
    """The MLflow tracking URI (None for 'none'), checked to be reachable in a few seconds."""
    uri = None if str(args.tracking_uri).lower() in ("none", "", "off") else args.tracking_uri
    if uri is not None:
        check_tracking_uri(uri)
    return uri


def _config(args: argparse.Namespace, **extra: Any):
    from syno_automl.config import SearchConfig

    if getattr(args, "task", None) is None:
        args.task = "image"
    task = args.task
    if task != "lm":
        given = [o for o, v in (("--steps", args.steps), ("--time-budget", args.time_budget),
                                ("--seq-len", args.seq_len), ("--val-every", args.val_every),
                                ("--tokenizer", args.tokenizer)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to --task lm")
    elif args.epochs is not None or args.image_size is not None:
        raise ValueError("--epochs and --image-size apply to --task image; --task lm trains for --steps")
    config = SearchConfig(task=task, model=args.model, dataset=args.dataset, data_dir=args.data_dir,
                          flops_ratio=0.5 if args.flops_ratio is None else args.flops_ratio,
                          seed=0 if args.seed is None else args.seed, 
                          cost_ratio=1.0 if args.cost_ratio is None else (args.cost_ratio or None), **extra)
    for name, attr in (("objective", "objective"), ("pruner", "pruner"),
                       ("epochs", "epochs"), ("image_size", "image_size"), ("lr", "lr"),
                       ("max_depth", "max_depth"), ("timeout", "trial_timeout"), ("threads", "threads"),
                       ("steps", "max_steps"), ("time_budget", "time_budget"), ("seq_len", "seq_len"),
                       ("val_every", "val_every"), ("tokenizer", "tokenizer")):
        value = getattr(args, name, None)
        if value is not None:
            setattr(config, attr, value)
    if getattr(args, "timeout", None) == 0:
        config.trial_timeout = None
    if getattr(args, "time_budget", None) == 0:
        config.time_budget = None
    return config


def _load_study(args: argparse.Namespace):
    _quiet(verbose=getattr(args, "verbose", False))
    import optuna

    url = args.storage
    storage = existing_storage(url, lambda path: FileNotFoundError(
        f"no study database {path} here: run `syno-automl search` first, or pass --storage"))
    try:
        return optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        raise LookupError(f"no study {args.study!r} in {url}") from None


def _space_of(study):
    from syno_automl.space import OperatorSpace

    config = study.user_attrs.get(V.SPACE)
    if not isinstance(config, dict):
        raise LookupError(f"study {study.study_name!r} was not made by syno-automl (no syno.space attribute)")
    return OperatorSpace(**config)


def _find_trial(study, ref: str):
    return find_trial(study, ref)


def _find(study, ref: str):
    """(trial, Operator) for a trial number, ``best`` or an operator hash prefix (syno_automl.lookup)."""
    return find_operator(study, ref, _space_of)


# -- commands --------------------------------------------------------------------------------------------
def cmd_search(args: argparse.Namespace) -> int:
    # everything that can reject the invocation runs before torch, Lightning and MLflow load (seconds) and
    # before any database is created
    if args.trials < 0:
        raise ValueError(f"--trials must be >= 0, got {args.trials}")
    tracking_uri = _tracking(args)
    recorded = resume_defaults(args) if args.resume else None
    targets = tuple(t.strip() for t in args.latency.split(",") if t.strip())
    _require_tvm(targets, "--latency")
    config = _config(args, trials=args.trials, storage=args.storage, study=args.study,
                     tracking_uri=tracking_uri, heartbeat=args.heartbeat or None, latency_targets=targets,
                     latency_trials=args.latency_trials, latency_inductor=args.latency_inductor,
                     latency_margin=None if args.latency_margin < 0 else args.latency_margin,
                     finalists=args.finalists, final_epochs=args.final_epochs, final_seeds=args.final_seeds,
                     final_margin=args.final_margin)
    if args.epochs is None:
        config.epochs = 3
    if recorded is not None and isinstance(recorded.get("milestones"), dict):  # no option: the study's own
        config.milestones = {int(k): float(v) for k, v in recorded["milestones"].items()}
    config.validate()
    if recorded is not None:  # the same check as run_search's, before the imports
        from syno_automl.config import StudyMismatchError, describe_diff, settings_diff

        diff = settings_diff(recorded, config.settings())
        if diff:
            raise StudyMismatchError(f"study {config.study!r} was trained with other settings: {describe_diff(diff)}; "
                                     f"resume with the study's settings, or --study NAME for a new search")
    if not args.quiet:
        print(f"syno-automl: {'resuming' if args.resume else 'starting'} study {config.study!r} "
              f"({config.model} on {config.dataset}); loading torch, Lightning, MLflow...", flush=True)
    _quiet(training=True, verbose=args.verbose)
    from syno_automl.search.objectives import (baseline_trial, best_operator_trial, is_pareto, objective_name,
                                               operator_front, primary_value)
    from syno_automl.study import run_search

    result = run_search(config, resume=args.resume, out=None if args.quiet else sys.stdout)
    study = result.study
    name = objective_name(study)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    base = baseline_trial(study)
    print(f"done in {result.seconds:.0f} s: {len(study.trials)} trials, {len(done)} complete, {len(pruned)} pruned"
          + (f"; baseline {name} {primary_value(base):.4f}" if base else ""))
    if is_pareto(study):
        front = operator_front(study)
        print(f"Pareto front ({name} vs planned cost ratio, study.best_trials): {len(front)} operators"
              + "".join(f"\n  {t.user_attrs.get(V.HASH)} (trial {t.number}): {name} {t.values[0]:.4f} at "
                        f"{t.values[1]:.3f}x cost" for t in front))
    best = best_operator_trial(study)
    if best is not None:
        print(f"best operator {best.user_attrs.get(V.HASH)} (trial {best.number}): {name} {primary_value(best):.4f} "
              f"at {best.user_attrs.get(V.FLOPS_RATIO, float('nan')):.3f}x FLOPs, "
              f"{best.user_attrs.get(V.COST_RATIO, float('nan')):.3f}x cost  ->  "
              f"syno-automl show {best.user_attrs.get(V.HASH)}")
    if config.tracking_uri:
        print(f"MLflow: mlflow ui --backend-store-uri {config.tracking_uri} --host 127.0.0.1")
    if result.final is not None:  # the search's answer, last
        print(result.final.verdict())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from syno_automl.search.objectives import objective_name, primary_value

    study = _load_study(args)
    name = objective_name(study)
    if args.hash is None:
        trials = study.get_trials(deepcopy=False)
        print(f"study {study.study_name}: {len(trials)} trials ({name}; `syno-automl show N` for one)")
        print(f"{'trial':>5}  {'state':<8}  {'operator':<16}  {name:>8}  {'FLOPs':>7}  {'cost':>7}  reason")
        for t in trials:
            print(trial_line(t, name))
        return 0
    trial = _find_trial(study, args.hash)
    if trial.user_attrs.get(V.BASELINE):
        print(f"baseline (study {study.study_name}, trial {trial.number}, {trial.state.name}): the original layers")
    else:
        _, op = _find(study, f"#{trial.number}")
        print(f"operator {op.hash}  (study {study.study_name}, trial {trial.number}, {trial.state.name})")
        print(str(op))
        print(f"depth {op.depth}; primitives: {', '.join(op.primitives)}")
    for key, label in ((V.FLOPS_RATIO, "FLOPs ratio"), (V.FLOPS, "FLOPs"), (V.PARAMS, "params"),
                       (V.COST_RATIO, "cost ratio"), (V.COST, "cost"),
                       (V.MATERIALIZED, "elements materialized"), (V.PEAK, "peak tensor (elements)")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]}")
    if primary_value(trial) is not None:
        print(f"{name}: {primary_value(trial):.4f}")
    for key, label in ((V.TOKENS_PER_S, "training tokens/s"), (V.THROUGHPUT_RATIO, "throughput ratio")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]:.4g}")
    for key, label in ((V.FAILURE, "failure"), (V.PRUNED, "pruned")):
        if key in trial.user_attrs:
            print(f"{label}: {trial.user_attrs[key]}")
    run_id = trial.user_attrs.get(V.RUN_ID)
    if run_id:
        print(f"MLflow run: {run_id}" + _run_summary(_tracking(args), run_id))
    return 0


def _run_summary(tracking: str | None, run_id: str) -> str:
    """`` (FINISHED; artifacts: ...)`` read from the tracking store; '' without one."""
    if tracking is None:
        return ""
    from syno_automl.tracking import SearchTracker

    client = SearchTracker(tracking).client
    try:
        run = client.get_run(run_id)
        artifacts = sorted(a.path for a in client.list_artifacts(run_id))
    except Exception as e:  # noqa: BLE001 -- another store, or a deleted run: say so, show the rest
        return f" (not found in {tracking}: {type(e).__name__})"
    return f" ({run.info.status}; artifacts: {', '.join(artifacts) or 'none'})"


def cmd_export(args: argparse.Namespace) -> int:
    from syno_automl.export import layer_source, weights_for_mapping

    study = _load_study(args)
    trial, op = _find(study, args.hash)
    if not 0 <= args.mapping < op.space.num_mappings:
        raise ValueError(f"--mapping must be in [0, {op.space.num_mappings - 1}]")
    mapping = op.space.mapping(args.mapping)
    kind = study.user_attrs.get(V.SETTINGS, {}).get("layer", "conv2d")
    state = None
    if args.weights:
        tracking = _tracking(args)
        run_id = trial.user_attrs.get(V.RUN_ID)
        if tracking is None or not run_id:
            raise LookupError(f"--weights: trial {trial.number} has no MLflow run" if tracking else
                              "--weights reads the trained weights from MLflow: --tracking-uri none was given")
        state = weights_for_mapping(_download_weights(tracking, run_id, trial.number), mapping)
    bias = not args.no_bias if state is None else "bias" in state
    source = layer_source(op, args.mapping, kind=kind, bias=bias)
    if args.output:
        Path(args.output).write_text(source)
        print(f"wrote {args.output} (operator {op.hash}, trial {trial.number}, sizes {mapping}; "
              f"`python {args.output}` smoke-tests it)")
    else:
        sys.stdout.write(source)
    if state is not None:
        import torch

        torch.save(state, args.weights)
        print(f"wrote {args.weights} (trained weights: SynoLayer().load_state_dict(torch.load({args.weights!r})))",
              file=sys.stderr if not args.output else sys.stdout)
    return 0


def _download_weights(tracking: str, run_id: str, number: int) -> dict[str, Any]:
    import tempfile

    import torch

    from syno_automl.tracking import SearchTracker

    client = SearchTracker(tracking).client
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = client.download_artifacts(run_id, V.ARTIFACT_WEIGHTS, folder)
        except Exception as e:  # noqa: BLE001 -- MLflow raises several types for a missing artifact
            raise LookupError(f"trial {number}'s MLflow run {run_id} has no {V.ARTIFACT_WEIGHTS} (trials that "
                              f"did not complete, or searched before weights were kept): {type(e).__name__}") from None
        return torch.load(path, weights_only=True)


def cmd_report(args: argparse.Namespace) -> int:
    from syno_automl.report import (canonical_rate_table, latency_devices, latency_schedules, latency_series,
                                    latency_table, plot_pareto, points_of, reevaluation_series, reevaluation_table,
                                    reevaluations_of, search_label, trial_table)
    from syno_automl.search.objectives import objective_name

    study = _load_study(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = objective_name(study)
    maximize = name == "val_acc"
    axis = {"maximize": maximize, "ylabel": "validation accuracy" if maximize else "validation loss"}
    points = points_of(study)
    settings = study.user_attrs.get(V.SETTINGS, {})
    tracking = _tracking(args)
    tracker = None
    if tracking:
        from syno_automl.tracking import SearchTracker

        tracker = SearchTracker(tracking)
    # `reevaluate` keeps its figures in MLflow runs only; `tune` in the study attr syno.latency
    reevaluated = reevaluations_of(tracker.reevaluation_runs(study.study_name), study, name) if tracker else []
    files = plot_pareto(points, out / "pareto_flops", title=f"{study.study_name}: {name} vs FLOPs",
                        budget=settings.get("flops_ratio"), label=f"operators ({search_label(settings)})",
                        series=reevaluation_series(reevaluated), **axis)
    from syno_automl.report_front import front_table, plot_cost_front

    files += plot_cost_front(study, out / "pareto_cost", **axis)
    for device in latency_devices(study):  # measured by the search or by `syno-automl tune`, side by side
        series = latency_series(study, device)
        if series:
            files += plot_pareto(list(series[0].points), out / f"pareto_latency_{device}", label=series[0].label,
                                 series=series[1:], xlabel=f"latency of the replaced layers (ms) on {device}",
                                 title=f"{study.study_name}: {name} vs latency ({device}; "
                                       f"{'; '.join(latency_schedules(study, device))})", **axis)
    if not maximize:
        if tracking:
            files += _loss_curves(study, tracking, out, args.top)
        else:
            print("no loss curves: they are read from MLflow (--tracking-uri none was given)")
    space = _space_of(study)
    space.sample(32, seed=0, time_limit=30.0)  # exercise the rules so the counters mean something
    rates = canonical_rate_table(space.stats())
    later = (reevaluation_table(reevaluated, study, name) if tracker else
             "Not read: re-evaluations are kept in MLflow runs (--tracking-uri none was given).")
    text = (f"# syno-automl report: study {study.study_name}\n\n## Trials\n\n{trial_table(study)}\n\n"
            f"## Pareto front ({name} vs planned cost ratio; pareto_cost.png)\n\n{front_table(study)}\n\n"
            f"## Re-evaluated (`syno-automl reevaluate`, beside the search's figures)\n\n{later}\n\n"
            f"## Latency (measured by the search and by `syno-automl tune`)\n\n{latency_table(study)}\n\n"
            f"## Canonical rates (children kept by the canonical rules, per depth; 32 samples)\n\n{rates}\n")
    (out / "report.md").write_text(text)
    files.append(out / "report.md")
    print(text)
    run_id = study.user_attrs.get(V.RUN_ID)
    if tracker is not None and run_id:
        client = tracker.client
        for f in files:
            client.log_artifact(run_id, str(f), artifact_path="report")
        print(f"logged {len(files)} files to MLflow run {run_id}")
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def _loss_curves(study, tracking: str, out: Path, top: int) -> list[Path]:
    """Loss-vs-step curves of the baseline and the `top` best operators, from their MLflow runs."""
    import optuna

    from syno_automl.report import plot_loss_curves
    from syno_automl.tracking import SearchTracker

    from syno_automl.search.objectives import primary_value

    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if primary_value(t) is not None and V.RUN_ID in t.user_attrs]
    base = [t for t in done if t.user_attrs.get(V.BASELINE)]
    ops = sorted((t for t in done if not t.user_attrs.get(V.BASELINE)), key=primary_value)[:top]
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


def cmd_enumerate(args: argparse.Namespace) -> int:
    from syno_automl.report import canonical_rate_table
    from syno_automl.study import prepare

    config = _config(args, tracking_uri=None)
    _quiet(training=True, verbose=args.verbose)
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
    from syno_automl.search.objectives import primary_value
    from syno_automl.study import prepare, train_operator

    study = _load_study(args)
    # the baseline is retrained at the same budget, first: the operators' new figures are judged against it
    refs = [h for h in args.hashes if h.lower() != "baseline"]
    found: list[tuple[Any, Any]] = [_find(study, h) for h in refs]
    if not args.no_baseline:
        found.insert(0, (_find_trial(study, "baseline"), None))
    config = _config(args, tracking_uri=_tracking(args), study=args.study)
    if args.epochs is None:
        config.epochs = 10
    if args.steps is None:
        config.max_steps = 1000
    label, schedule = ((config.objective_name, f"{config.max_steps} steps") if config.task == "lm"
                       else ("val_acc", f"{config.epochs} epochs"))
    _quiet(training=True, verbose=args.verbose)
    context = prepare(config)
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
    from syno_automl.cli_text import layer_line, progress_printer, total_line

    if args.tune_trials < 0:
        raise ValueError(f"--tune-trials must be >= 0, got {args.tune_trials}")
    device = measure.device_name(args.target)  # a malformed rpc:KEY@host:port fails here, before any work
    _require_tvm([args.target], "--target")
    eager = not measure.needs_tvm(args.target)
    study = _load_study(args)
    trial, op = _find(study, args.hash)
    n = op.space.num_mappings
    schedules = measure.schedules_label(args.tune_trials, args.seconds, eager=eager)
    print(f"operator {op.hash} (trial {trial.number}) on {args.target}: {n} replaced layer{'s' if n != 1 else ''}, "
          f"{schedules}{'' if args.no_inductor or eager else '; TorchInductor too'}", flush=True)
    # every layer: operator and inferred baseline, same budget and protocol (measure.measure_layers)
    settings = study.user_attrs.get("syno.settings", {})
    batch = args.batch if args.batch is not None else (
        settings.get("seq_len", 64) if settings.get("task") == "lm" else 1)
    result = measure.measure_layers(op, [args.target], args.tune_trials, args.seconds, work_dir=args.work_dir,
                                    inductor=not args.no_inductor, protocol=measure.PROTOCOL, fail_fast=True,
                                    sizes={"N": batch} if batch else None,
                                    progress=progress_printer(quiet=args.quiet))
    summary = result["devices"][device]
    for layer in summary["layers"]:
        print(layer_line(layer, schedules), flush=True)
    if summary["latency_ms"] is None or summary["baseline_ms"] is None:
        notes = result["notes"]
        why = notes.get(V.latency_metric(device)) or notes.get(V.baseline_latency_metric(device)) or "no reason given"
        raise RuntimeError(f"no latency on {device} ({schedules}): {why}")
    print(total_line(summary, device))
    entry = measure.stored_entry(summary)
    latencies = dict(study.user_attrs.get("syno.latency", {}))  # read again: measuring took a while
    latencies[op.hash] = {**latencies.get(op.hash, {}), device: entry}
    study.set_user_attr("syno.latency", latencies)
    print(f"stored syno.latency[{op.hash}][{device}] in study {study.study_name} (tuned_trials {entry['tuned_trials']})")
    tracking = _tracking(args)
    run_id = trial.user_attrs.get("syno.mlflow_run_id")
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


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # anywhere: while importing, loading data, training (see syno_automl.interrupt)
        print("syno-automl: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.quiet:
        logging.disable(logging.WARNING - 1)  # warnings and errors only
    try:
        return int(args.func(args) or 0)
    except Exception as e:  # one clear line; --debug for the traceback
        if getattr(args, "debug", False):
            traceback.print_exc()
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"syno-automl: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
