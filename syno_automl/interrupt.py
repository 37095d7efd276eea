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

A KeyboardInterrupt can also be lost: raised inside a finalizer (``__del__`` during garbage collection, e.g.
Lightning's ``Profiler.__del__`` in the collection after each trial), Python prints "Exception ignored in ..." and
goes on. Inside :func:`stop_on_signals` (the CLI's commands, :func:`~syno_automl.study.run_search`) SIGINT and
SIGTERM are therefore recorded before they raise KeyboardInterrupt, and checkpoints (:func:`check_interrupt`: after
each trial, at a trial's start, after each batch of training, per finalist) raise it again from that record. SIGTERM
(``timeout``, ``kill``, job schedulers) stops a command the same way; the exit status is 128 + the signal's number
(:func:`exit_status`: 130, 143), and the CLI's process then ends without the interpreter's teardown
(:func:`exit_promptly`). A second signal while the first is being handled ends the process at once (``os._exit``):
what the first left RUNNING, a ``--resume`` retries (heartbeats) and ``syno-automl show`` calls stale.

Example:
    >>> fit(trainer, task, datamodule=datamodule)   # doctest: +SKIP
    >>> with deferred_interrupt():                  # doctest: +SKIP
    ...     client.set_terminated(run_id, "KILLED")
    >>> with stop_on_signals():                     # doctest: +SKIP
    ...     run()                                   # a Ctrl-C swallowed in a finalizer is raised again here:
    ...     check_interrupt()
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

__all__ = ["fit", "deferred_interrupt", "Deferring", "interrupt_safe", "stop_on_signals", "check_interrupt",
           "interrupt_requested", "exit_status", "exit_promptly", "exit_on_signals", "STOP_SIGNALS", "STOP_REASONS",
           "stop_reason"]

T = TypeVar("T")

#: the signals that stop a command cleanly: Ctrl-C, and what ``timeout``, ``kill`` and job schedulers send
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: why a trial or run that a stop signal ended failed, per signal (recorded on it; a --resume runs another instead)
STOP_REASONS: dict[int, str] = {
    signal.SIGINT: "interrupted by the user (Ctrl-C / SIGINT)",
    signal.SIGTERM: "stopped by SIGTERM (timeout, kill or a job scheduler)",
}


class _Stop:
    """The state of :func:`stop_on_signals` (main thread only: Python runs signal handlers there)."""
    installed = False
    requested: int | None = None   # the first stop signal received, kept until the next stop_on_signals
    deferring = 0                  # deferred_interrupt blocks open
    pending = False                # a signal received inside one: raised when the outermost ends


_stop = _Stop()


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _on_stop_signal(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM: recorded, then KeyboardInterrupt (held until the database write ends inside
    :func:`deferred_interrupt`); a second one while the first is handled ends the process at once."""
    if _stop.requested is not None:
        _exit_now(signum)
    _stop.requested = signum
    if _stop.deferring > 0:
        _stop.pending = True
        return
    raise KeyboardInterrupt(_name(signum))


def _exit_now(signum: int) -> None:
    """Exit status 128 + `signum` now, without unwinding (the output flushed as far as it can be)."""
    try:
        os.write(2, f"\nsyno-automl: {_name(signum)} again: stopped at once (a --resume retries what was left "
                    f"running)\n".encode())
    except OSError:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- a write of the main thread cut short (reentrant call): best effort
            pass
    os._exit(128 + signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise KeyboardInterrupt and are recorded (:func:`interrupt_requested`),
    so that :func:`check_interrupt` raises again one that a finalizer swallowed; a second signal ends the process
    at once (exit status 128 + its number). The record of an earlier block is cleared. A no-op off the main thread
    and inside another such block; a signal ignored when the block starts (SIG_IGN: a background job) stays
    ignored. The handlers in place before are restored when the block ends."""
    if threading.current_thread() is not threading.main_thread() or _stop.installed:
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    _stop.requested, _stop.deferring, _stop.pending = None, 0, False
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _on_stop_signal)
    _stop.installed = True
    try:
        yield
    finally:
        _stop.installed = False
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def interrupt_requested() -> int | None:
    """The stop signal received inside the current (or last) :func:`stop_on_signals` block, or None."""
    return _stop.requested


def stop_reason() -> str:
    """The reason recorded on what the stop signal received ended; Ctrl-C's for a KeyboardInterrupt no signal
    caused."""
    return STOP_REASONS[_stop.requested if _stop.requested in STOP_REASONS else signal.SIGINT]


def exit_status() -> int:
    """The exit status of a command stopped by an interrupt: 128 + the signal (130 Ctrl-C, 143 SIGTERM); 130 for
    a KeyboardInterrupt no signal caused."""
    return 128 + (_stop.requested or signal.SIGINT)


def exit_promptly(status: int) -> NoReturn:
    """Ends the process now with `status`, after its atexit functions and a flush of its output, without the
    interpreter's teardown (collecting and finalizing every module and object: seconds with torch, Lightning and
    MLflow loaded, on a loaded machine). For a command stopped by a signal, once its own cleanup is done."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- a reader that left: nothing more to say to it
            pass
    os._exit(status)


def exit_on_signals() -> None:
    """From now on (the main thread), SIGINT and SIGTERM end the process at once with 128 + the signal: for a
    command whose work is done, during the interpreter's teardown (seconds with torch loaded), where Python's own
    handler would print a KeyboardInterrupt traceback or end the process by the signal itself."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _exit_at_once)


def _exit_at_once(signum: int, frame: Any) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 -- best effort
            pass
    os._exit(128 + signum)


def check_interrupt(before: Callable[[], Any] | None = None) -> None:
    """Raises KeyboardInterrupt when a stop signal was received (:func:`stop_on_signals`), even one whose
    KeyboardInterrupt was swallowed (a finalizer, a library's ``except``); `before` runs first (e.g. it records the
    reason on the trial being stopped). A checkpoint: after a trial, at a trial's start, per finalist."""
    if _stop.requested is not None:
        if before is not None:
            before()
        raise KeyboardInterrupt(f"interrupted ({_name(_stop.requested)})")


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """A Ctrl-C (or SIGTERM, inside :func:`stop_on_signals`) inside the block is raised as KeyboardInterrupt when
    the block ends (replacing any exception the block raised); nested blocks raise it once, when the outermost
    ends. A no-op off the main thread (signals reach only the main thread) and, outside stop_on_signals, where
    SIGINT has another handler than Python's default (an enclosing block already holds it; Lightning's teardown
    ignores it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _stop.installed:
        _stop.deferring += 1
        try:
            yield
        finally:
            _stop.deferring -= 1
            if _stop.deferring == 0 and _stop.pending:
                _stop.pending = False
                raise KeyboardInterrupt(_name(_stop.requested or signal.SIGINT))
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
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
    """``trainer.fit(*args, **kwargs)``; Ctrl-C (or SIGTERM inside :func:`stop_on_signals`) raises KeyboardInterrupt
    (after Lightning's teardown). Inside stop_on_signals, a signal whose KeyboardInterrupt was swallowed during
    training stops it at the next batch."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    if _stop.installed:
        trainer.callbacks.append(_stop_callback())
    try:
        trainer.fit(*args, **kwargs)
    except SystemExit as e:
        # Lightning raises sys.exit(1) inside its `except KeyboardInterrupt`: that is the exit's __context__; a
        # SIGTERM it noticed first (its own handler runs beside ours) ends in its SIGTERMException, a SystemExit
        if not isinstance(e.__context__, KeyboardInterrupt) and _stop.requested is None:
            raise
        if main:  # Lightning set SIGINT to SIG_IGN for its teardown
            signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
        raise KeyboardInterrupt("interrupted during training") from None
    check_interrupt()


def _stop_callback() -> Any:
    """A Lightning callback that raises KeyboardInterrupt after a batch once a stop signal was received."""
    import lightning as L

    class StopWhenRequested(L.Callback):
        def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
            check_interrupt()

        def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
            check_interrupt()

    return StopWhenRequested()
