"""What the ``syno-automl`` commands share: quiet library logs, the TVM check, the MLflow URI and the
SearchConfig from the flags, the study and its operators (CLI only)."""
from __future__ import annotations

import argparse
import logging
import os
import warnings
from typing import Any, Sequence

from syno_automl import vocabulary as V
from syno_automl.lookup import check_tracking_uri, existing_storage, find_operator

__all__ = ["quiet_logs", "require_tvm", "tracking_of", "config_of", "load_study", "space_of", "operator_of"]


def quiet_logs(training: bool = False, verbose: bool = False) -> None:
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


def require_tvm(targets: Sequence[str], flag: str) -> None:
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


def tracking_of(args: argparse.Namespace) -> str | None:
    """The MLflow tracking URI (None for 'none'), checked to be reachable in a few seconds."""
    uri = None if str(args.tracking_uri).lower() in ("none", "", "off") else args.tracking_uri
    if uri is not None:
        check_tracking_uri(uri)
    return uri


def config_of(args: argparse.Namespace, **extra: Any):
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
                       ("val_every", "val_every"), ("tokenizer", "tokenizer"), ("opening", "opening"),
                       ("screen", "screen"), ("screen_threshold", "screen_threshold")):
        value = getattr(args, name, None)
        if value is not None:
            setattr(config, attr, value)
    if getattr(args, "timeout", None) == 0:
        config.trial_timeout = None
    if getattr(args, "time_budget", None) == 0:
        config.time_budget = None
    return config


def load_study(args: argparse.Namespace):
    quiet_logs(verbose=getattr(args, "verbose", False))
    import optuna

    url = args.storage
    storage = existing_storage(url, lambda path: FileNotFoundError(
        f"no study database {path} here: run `syno-automl search` first, or pass --storage"))
    try:
        return optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        raise LookupError(f"no study {args.study!r} in {url}") from None


def space_of(study):
    from syno_automl.space import OperatorSpace

    config = study.user_attrs.get(V.SPACE)
    if not isinstance(config, dict):
        raise LookupError(f"study {study.study_name!r} was not made by syno-automl (no syno.space attribute)")
    return OperatorSpace(**config)


def operator_of(study, ref: str):
    """(trial, Operator) for a trial number, ``best`` or an operator hash prefix (syno_automl.lookup)."""
    return find_operator(study, ref, space_of)
