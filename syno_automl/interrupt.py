"""Ctrl-C stays a KeyboardInterrupt through Lightning, so a search can fail the running trial and exit 130.

Lightning's Trainer catches KeyboardInterrupt in ``fit``, runs its ``on_exception`` hooks and teardown, sets
SIGINT to be ignored and calls ``sys.exit(1)`` (lightning/pytorch/trainer/call.py,
``_call_and_handle_interrupt``). A SystemExit passes through Optuna's ``optimize`` without failing the trial,
which then stays RUNNING. `fit` keeps Lightning's clean shutdown and turns that exit back into the interrupt.

Example:
    >>> fit(trainer, task, datamodule=datamodule)   # doctest: +SKIP
"""
from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["fit"]


def fit(trainer: Any, *args: Any, **kwargs: Any) -> None:
    """``trainer.fit(*args, **kwargs)``; Ctrl-C raises KeyboardInterrupt (after Lightning's teardown)."""
    try:
        trainer.fit(*args, **kwargs)
    except SystemExit as e:
        # Lightning raises sys.exit(1) inside its `except KeyboardInterrupt`: that is the exit's __context__
        if not isinstance(e.__context__, KeyboardInterrupt):
            raise
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)  # Lightning set it to SIG_IGN
        raise KeyboardInterrupt("interrupted during training") from None
