"""The final stage's timing in a fresh process: the finalists and the original timed by the speed protocol in a new
Python process (``spawn``), so that nothing the search left in its own process weighs on the verdict's figures:
the allocator's fragmentation after many trials, oneDNN's and Inductor's caches, torch's thread pool, the memory
of the trials' models and data. The new process rebuilds the subject by its recipe (:class:`SpeedSubject`; the
study's recipe prepares the search's context from its config and the batches read off its data: the same seed, so
the same model, batch and space; it loads no data and imports no Lightning), the operators from their JSON, and
sends the figures back. The child is an entry point: it sets its process up (runtime/process.py: threads, the
steady allocator) before it times.

Where a fresh process cannot be had (no ``spawn``, the config cannot be sent, the process dies), the stage times in
its own process and the label says why. The child never sees a Ctrl-C (it is born with SIGINT blocked); the parent
handles it and ends the child at once (SIGKILL), then raises.
``--speed-process same`` (or ``$SYNO_AUTOML_SPEED_PROCESS=same``; resolved once, into the run context, by
:func:`speed_process_of`) times in the search's process: no start-up (~1.7 s on the default search: torch, the
space and the models), for quick checks and tests.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import queue
import signal
from collections.abc import Iterator
from typing import Any

from syno_automl.errors import OptionError
from syno_automl.speed.paired import SPEED_PROTOCOL, PairedProtocol
from syno_automl.speed.probe import SpeedMeasurement, measure_speedups
from syno_automl.speed.subject import SpeedSubject, SubjectRecipe

__all__ = ["FRESH", "SAME", "SPEED_PROCESS_ENV", "FRESH_LABEL", "speed_process_of", "measure_in_fresh_process"]

FRESH, SAME = "fresh", "same"
#: the default of --speed-process where the flag is not given
SPEED_PROCESS_ENV = "SYNO_AUTOML_SPEED_PROCESS"
#: the end of the label of a measurement made in a fresh process
FRESH_LABEL = " (a fresh process)"


def speed_process_of(flag: str | None) -> str:
    """--speed-process's value (`flag`), else $SYNO_AUTOML_SPEED_PROCESS, else fresh."""
    chosen = flag or os.environ.get(SPEED_PROCESS_ENV) or FRESH
    if chosen not in (FRESH, SAME):
        raise OptionError(f"${SPEED_PROCESS_ENV} must be {FRESH!r} or {SAME!r}, got {chosen!r}")
    return chosen


def _child(recipe: SubjectRecipe, target: Any, texts: list[str], threads: int, protocol: PairedProtocol,
           answer: Any) -> None:
    """In the fresh process (an entry point: it sets its process up): the subject again by its recipe, the
    operators from JSON, the figures back as plain data."""
    try:
        import warnings

        warnings.filterwarnings("ignore")
        from syno_automl.runtime.process import configure_process
        from syno_automl.space import Operator

        configure_process(threads=threads)
        subject = recipe(target)
        ops = [Operator.from_json(subject.substitution.space, text) for text in texts]
        speed = measure_speedups(subject, ops, threads, protocol)
        answer.put(("ok", speed.to_dict()))
    except BaseException as exc:  # noqa: BLE001 -- whatever it was, the parent times in its own process
        answer.put(("error", f"{type(exc).__name__}: {str(exc).strip()[:300]}"))


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked (held, not lost: delivered when unblocked) in this thread, so that a process started here
    inherits the mask and never sees the terminal's Ctrl-C, which reaches the whole process group."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def measure_in_fresh_process(subject: SpeedSubject, ops: list[Any], threads: int | None = None,
                             protocol: PairedProtocol = SPEED_PROTOCOL, poll_s: float = 0.2) -> SpeedMeasurement:
    """:func:`~syno_automl.speed.probe.measure_speedups` in a new process; in this one (saying why in the label)
    when that fails (no recipe, no ``spawn``, the process dies). A KeyboardInterrupt here (Ctrl-C, SIGTERM)
    terminates the child and propagates."""
    import torch

    if subject.recipe is None:
        speed = measure_speedups(subject, ops, threads, protocol)
        speed.label += " (in this process: the subject has no recipe to rebuild it in a fresh one)"
        return speed
    threads = threads or torch.get_num_threads()
    spawn = multiprocessing.get_context("spawn")
    answer = spawn.Queue()
    texts = [op.to_json() for op in ops]
    child = spawn.Process(target=_child, args=(subject.recipe, subject.target, texts, threads, protocol, answer),
                          name="syno-speed", daemon=True)
    why: str | None = None
    started = False
    try:
        with _sigint_blocked():   # born with SIGINT blocked: a Ctrl-C is the parent's to handle (it ends this one)
            child.start()
        started = True
        while True:
            try:
                status, data = answer.get(timeout=poll_s)
                break
            except queue.Empty:
                if not child.is_alive():
                    status, data = "error", f"the process ended (exit status {child.exitcode})"
                    break
        if status == "ok":
            speed = SpeedMeasurement.from_dict(data)
            speed.label += FRESH_LABEL
            return speed
        why = str(data)
    except (OSError, ValueError, TypeError, AttributeError, RuntimeError, pickle.PicklingError) as exc:
        why = f"{type(exc).__name__}: {exc}"   # spawn or sending the config failed
    finally:
        if started:
            if child.is_alive():
                child.kill()
            child.join(timeout=5)
        answer.close()
    speed = measure_speedups(subject, ops, threads, protocol)
    speed.label += f" (in the search's process: a fresh one failed: {why})"
    return speed
