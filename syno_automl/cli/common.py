"""What the ``syno-automl`` commands share: quiet library logs, the TVM check, the MLflow URI and the
study and its operators (CLI only; the SearchConfig from the flags: cli_options)."""
from __future__ import annotations

import argparse
import logging
import os
import warnings
from collections.abc import Sequence

from syno_automl import vocabulary as V
from syno_automl.cli.lookup import check_tracking_uri, existing_storage, find_operator, missing_database
from syno_automl.errors import MissingDependencyError, NotFoundError, OptionError
from syno_automl.settings import SETTING

__all__ = ["quiet_logs", "require_tvm", "require_cuda", "tracking_of", "load_study", "space_of", "operator_of"]


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
    if not targets:   # (syno_automl.measure loads torch)
        return
    from syno_automl.measure import TVM_HINT, needs_tvm

    wanting = [t for t in targets if needs_tvm(t)]
    if not wanting:
        return
    try:
        import tvm  # noqa: F401
    except ImportError as e:
        raise MissingDependencyError(f"{flag} {','.join(wanting)} needs TVM, which cannot be imported ({e}): "
                                     f"{TVM_HINT} (or {flag} torch: eager PyTorch, no TVM)") from None


def require_cuda(targets: Sequence[str], flag: str) -> None:
    """Fail at once when a TVM latency target is CUDA and this machine certainly has none (told without torch or TVM:
    runtime.cuda_presence); TVM would find out after its imports, or time nothing."""
    wanting = [t for t in targets if isinstance(t, str) and t.strip().lower().split(" ")[0] == "cuda"]
    if not wanting:
        return
    from syno_automl.runtime.cuda_presence import no_cuda_reason

    absent = no_cuda_reason()
    if absent is not None:
        raise OptionError(f"{flag} {','.join(wanting)}: {absent}; use {flag} llvm or torch (the CPU), or run where a "
                          f"CUDA GPU is")


def tracking_of(args: argparse.Namespace) -> str | None:
    """The MLflow tracking URI (None for 'none'), checked to be reachable in a few seconds."""
    uri = SETTING["tracking_uri"].from_cli(args.tracking_uri)
    if uri is not None:
        check_tracking_uri(uri)
    return uri


def load_study(args: argparse.Namespace):
    quiet_logs(verbose=getattr(args, "verbose", False))
    import optuna

    url = args.storage
    storage = existing_storage(url, lambda path: FileNotFoundError(
        missing_database(url, path, default=url == SETTING["storage"].default)))
    try:
        return optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        from syno_automl.study.storage import study_names

        names = ", ".join(study_names(storage)) or "none"   # not a pareto search's companion (<study>.fidelity)
        raise NotFoundError(f"no study {args.study!r} in {url} (studies there: {names}; --study NAME)") from None


def space_of(study):
    from syno_automl.space import OperatorSpace

    config = study.user_attrs.get(V.SPACE)
    if not isinstance(config, dict):
        raise NotFoundError(f"study {study.study_name!r} was not made by syno-automl (no syno.space attribute)")
    return OperatorSpace(**config)


def operator_of(study, ref: str):
    """(trial, Operator) for a trial number, ``best`` or an operator hash prefix (syno_automl.cli.lookup)."""
    return find_operator(study, ref, space_of)
