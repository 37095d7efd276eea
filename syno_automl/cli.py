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
import logging
import sys
import traceback
from typing import Sequence

from syno_automl.cli_measure import cmd_enumerate, cmd_reevaluate, cmd_tune
from syno_automl.cli_report import cmd_report
from syno_automl.cli_search import cmd_export, cmd_search, cmd_show

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


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
    p.add_argument("--opening", choices=["known", "none"], default=None,
                   help="known: the first operator trials are the replaced layer's grouped forms that the space "
                        "holds (a grouped conv, a block-diagonal linear), so the tree starts from a known trade of "
                        "accuracy for speed; none: MCTS from the first trial (default: known)")
    p.add_argument("--screen", choices=["off", "loss-slope", "naswot"], default=None,
                   help="image: score each operator cheaply before its training and prune it there when the score "
                        "is below --screen-threshold (loss-slope: its loss drop over a few steps vs the baseline's; "
                        "naswot: a training-free score at init) (default: off)")
    p.add_argument("--screen-threshold", type=float, default=None,
                   help="the score an operator must reach with --screen (default: the screen's own)")
    p.add_argument("--finalists", type=int, default=3,
                   help="final stage: re-train this many operators cheaper than the replaced layers (best first) and "
                        "the baseline alike, time the whole models, and name the fastest within --final-margin of "
                        "the baseline (default: %(default)s; 0: no final stage)")
    p.add_argument("--final-epochs", type=int, default=None,
                   help="final stage: training epochs (default: twice --epochs)")
    p.add_argument("--final-steps", type=int, default=None,
                   help="lm final stage: training steps, without --time-budget (default: twice --steps)")
    p.add_argument("--final-seeds", type=int, default=3,
                   help="final stage: training seeds per model, reported as mean ± sd (default: %(default)s)")
    p.add_argument("--final-margin", type=float, default=0.01,
                   help="final stage: the accuracy an operator may lose against the baseline, absolute "
                        "(default: %(default)s = 1 pp); lm: the val_loss it may gain, in nats (0.01: ~1 %% perplexity)")
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
