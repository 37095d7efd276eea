"""Ctrl-C stays a KeyboardInterrupt through Lightning, so a search can fail the running trial and exit 130, and it
never lands inside a database write, so that the trial and its run can still be marked.

Lightning's Trainer catches KeyboardInterrupt in ``fit``, runs its ``on_exception`` hooks and teardown, sets
SIGINT to be ignored and calls ``sys.exit(1)`` (lightning/pytorch/trainer/call.py,
``_call_and_handle_interrupt``). A SystemExit passes through Optuna's ``optimize`` without failing the trial,
which then stays RUNNING. `fit` keeps Lightning's clean shutdown and turns that exit back into the interrupt.

A KeyboardInterrupt raised inside SQLAlchemy's commit or close can leave SQLite's write lock with a connection
nobody closes: every later write of the process then fails with "database is locked", and the interrupted trial's
MLflow run stays RUNNING (seen in 4 of 100 interrupts landing during `log_batch`). `deferred_interrupt` holds a
Ctrl-C until the write is done; `Deferring` (the MLflow client) and `interrupt_safe` (Optuna storages) put every
database call in one.

Example:
    >>> fit(trainer, task, datamodule=datamodule)   # doctest: +SKIP
    >>> with deferred_interrupt():                  # doctest: +SKIP
    ...     client.set_terminated(run_id, "KILLED")
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import signal
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

__all__ = ["fit", "deferred_interrupt", "Deferring", "interrupt_safe"]

T = TypeVar("T")


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """A Ctrl-C inside the block is raised as KeyboardInterrupt when the block ends (replacing any exception the
    block raised). A no-op off the main thread (signals reach only the main thread) and where SIGINT has another
    handler than Python's default (an enclosing block already holds it; Lightning's teardown ignores it)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if received:
            raise KeyboardInterrupt("interrupted")


def _deferred(function: Any) -> Any:
    """``function``, each call run in :func:`deferred_interrupt`."""
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        with deferred_interrupt():
            return function(*args, **kwargs)

    return call


class Deferring:
    """``target`` whose every method call runs in :func:`deferred_interrupt` (e.g. an ``MlflowClient``)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        return _deferred(attr) if callable(attr) else attr


def interrupt_safe(cls: type[T]) -> type[T]:
    """Class decorator: every public method of ``cls`` and its bases runs in :func:`deferred_interrupt`. For
    subclasses of Optuna storages, which must stay storages (Optuna checks isinstance for caching and
    heartbeats, so a proxy like :class:`Deferring` would not do)."""
    names = {name for klass in cls.__mro__ if klass is not object for name, value in vars(klass).items()
             if not name.startswith("_") and inspect.isfunction(value)}
    for name in names:
        setattr(cls, name, _deferred(getattr(cls, name)))
    return cls


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
