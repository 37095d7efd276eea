"""``syno-automl``: search, inspect, export, report, enumerate, re-evaluate and tune synthesized operators.

    syno-automl search                      # embedded default: digits, small CNN, 10 trials, syno.db + mlflow.db;
                                            # (val_acc, cost ratio) Pareto study, Hyperband over the epochs
    syno-automl search --objective accuracy --pruner none   # single-objective, no multi-fidelity pruning
    syno-automl search --resume --trials 20 # continue the study
    syno-automl search --task lm --study lm # GPT QKV projections on the embedded text corpus, val_loss
    syno-automl show 3f2a                   # an operator of the study (hash prefix)
    syno-automl export 3f2a -o op.py        # standalone PyTorch module
    syno-automl report                      # the verdict, Pareto plots (PNG/SVG, logged to MLflow), the front, tables
    syno-automl enumerate                   # counts and canonical rates of the default space
    syno-automl reevaluate 3f2a --epochs 10 # retrain chosen operators, each an MLflow run linked to its trial
    syno-automl tune 3f2a --target llvm     # TVM latency vs the replaced layers
    syno-automl calibrate --target cuda.compiled --out gpu.json   # a cost profile measured here (--cost-profile)

Errors are one line (``syno-automl: error: ...``); ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from syno_automl.cli.measure import cmd_calibrate, cmd_enumerate, cmd_reevaluate, cmd_tune
from syno_automl.cli.options import add_setting_flags
from syno_automl.cli.preflight import check_database
from syno_automl.cli.report import cmd_report
from syno_automl.cli.search import cmd_export, cmd_search, cmd_show
from syno_automl.cost_profile import TARGETS as COST_TARGETS
from syno_automl.interrupt import exit_on_signals, exit_promptly, exit_status, interrupt_requested, stop_on_signals

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _verbosity(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines, warnings and errors only")
    p.add_argument("-v", "--verbose", action="store_true", help="the libraries' info logs too (Optuna, MLflow...)")


def _debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def build_parser() -> argparse.ArgumentParser:
    from syno_automl import __version__

    parser = _Parser(prog="syno-automl", description="Synthesize neural operators with Optuna + MLflow.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("search", help="run (or --resume) a search")
    add_setting_flags(p, "search")   # syno_automl.settings: every search setting that has a flag
    _debug(p)
    p.add_argument("--resume", action="store_true",
                   help="continue an existing study with its settings (options given must agree with them)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("show", help="list the study's trials, or describe one")
    p.add_argument("hash", nargs="?", default=None, metavar="TRIAL",
                   help="best, baseline, a trial number, or an operator hash (a unique prefix is enough); "
                        "none: list the trials")
    add_setting_flags(p, "show")
    _debug(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("list", help="the study's trials: number, state, operator, value, FLOPs, reason")
    add_setting_flags(p, "list")
    _debug(p)
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
    add_setting_flags(p, "export")
    _debug(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("report", help="the final stage's verdict, Pareto plots and tables")
    p.add_argument("--out", default="report", help="output folder (default: %(default)s)")
    p.add_argument("--rates", type=int, default=0, metavar="N",
                   help="also the canonical-rate table, over N samples of the space (seconds to a minute; "
                        "default: %(default)s, none)")
    p.add_argument("--top", type=int, default=3, help="lm: loss curves of this many best operators (default: 3)")
    add_setting_flags(p, "report")
    _debug(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("enumerate", help="counts and canonical rates of the (default) space")
    add_setting_flags(p, "enumerate")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds; 0: no limit (default: %(default)s)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(func=cmd_enumerate)

    p = sub.add_parser("reevaluate", help="retrain chosen operators (e.g. longer, bigger dataset)",
                       description="Re-trains the operators named, and the baseline first, as the search did: a "
                                   "flag not given takes the study's recorded setting (its space and budgets "
                                   "always do), except --epochs (default 10) and --steps (lm, default 1000).")
    p.add_argument("hashes", nargs="+", metavar="TRIAL", help="best, trial numbers or operator hash prefixes")
    p.add_argument("--no-baseline", action="store_true",
                   help="do not retrain the baseline (by default it is retrained first, at the same budget)")
    add_setting_flags(p, "reevaluate")
    _debug(p)
    p.set_defaults(func=cmd_reevaluate)

    p = sub.add_parser("calibrate", help="measure a cost profile on this machine (for --cost-profile)")
    p.add_argument("--target", required=True, choices=COST_TARGETS,
                   help="where and how the model will run: device (cpu, cuda) . execution (eager, compiled)")
    p.add_argument("--out", required=True, metavar="FILE", help="the profile file to write (JSON)")
    p.add_argument("--operators", type=int, default=24,
                   help="operators sampled from the search's space and timed (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per operator, the median kept "
                                                           "(default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--from-study", action="store_true",
                   help="time nothing: fit the profile to the speedups the study's trials measured on --target "
                        "(--storage, --study; the study's own settings)")
    add_setting_flags(p, "calibrate")
    _debug(p)
    p.set_defaults(func=cmd_calibrate)

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
    add_setting_flags(p, "tune")
    _debug(p)
    p.set_defaults(func=cmd_tune)
    for command in sub.choices.values():
        _verbosity(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C and SIGTERM stop a command cleanly, exit status 130 / 143; a second one stops it at once
    with stop_on_signals():
        try:
            code = _main(argv)
        except KeyboardInterrupt:  # anywhere: while importing, loading data, training (see syno_automl.interrupt)
            return _interrupted(argv is None)
        except BrokenPipeError:  # `syno-automl show | head`: the reader left; stop quietly, as Unix tools do
            return _reader_gone()
        # a signal whose KeyboardInterrupt was swallowed (a finalizer) after the command's last checkpoint
        if interrupt_requested() is not None:
            return _interrupted(argv is None)
    if argv is None:   # the process's own command, done: a signal in the interpreter's teardown ends it at once
        exit_on_signals()
    return code


def _interrupted(exit_now: bool) -> int:
    """Exit status 128 + the stop signal (130: Ctrl-C, 143: SIGTERM), with one line. `exit_now` (the process's own
    command: main() without arguments): the process ends here, without the interpreter's seconds of teardown."""
    status = exit_status()
    print("syno-automl: interrupted" + ("" if status == 130 else " (SIGTERM)" if status == 143 else
                                        f" (signal {status - 128})"), file=sys.stderr)
    if exit_now:
        exit_promptly(status)
    return status


def _reader_gone() -> int:
    """Exit status 141 (128 + SIGPIPE, what a shell reports for a tool killed by it), with stdout pointed at
    /dev/null so that the interpreter's last flush of the buffered output does not fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test's capture): nothing will be flushed to it
        pass
    return 141


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.quiet:
        logging.disable(logging.WARNING - 1)  # warnings and errors only
    try:
        if isinstance(getattr(args, "storage", None), str):   # a damaged study database named before the imports
            check_database(args.storage, "--storage")
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left shows here, inside main's BrokenPipeError handler
        return code
    except BrokenPipeError:
        raise
    except Exception as e:  # noqa: BLE001 -- one clear line; --debug for the traceback
        if interrupt_requested() is not None:   # an error an interrupt caused on its way out: it is the interrupt
            raise KeyboardInterrupt from e
        if getattr(args, "debug", False):
            traceback.print_exc()
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"syno-automl: error: {message}", file=sys.stderr)
        return 1

