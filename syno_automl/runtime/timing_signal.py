""""A timing is in progress": one process-wide signal between the code that times models and background work.

A timing (a trial's speed measurement, the final stage's sessions) wraps itself in :func:`timing_in_progress`;
background work that would weigh on its figures (the search's prefetch, sampling rollouts on the other core) runs
each short step inside :func:`between_timings`, which waits while a timing is in progress. The timing first waits
(at most ``settle_s``) for the steps under way to end. Neither side knows the other: the signal is all they share.

Example:
    >>> import threading
    >>> with timing_in_progress():
    ...     pass
    >>> with between_timings(threading.Event()) as admitted:
    ...     admitted
    True
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["timing_in_progress", "between_timings"]

_quiet = threading.Condition()
_timings = 0      # timing blocks open
_background = 0   # background steps under way

_POLL_S = 0.1     # how often a waiting step looks at its stop signal


@contextlib.contextmanager
def timing_in_progress(settle_s: float = 30.0) -> Iterator[None]:
    """Holds background steps while the block runs, after waiting (at most `settle_s`) for those under way to
    end: models timed on this machine would share its cores with them. Blocks may nest and overlap."""
    global _timings
    with _quiet:
        _timings += 1
        _quiet.wait_for(lambda: _background == 0, timeout=settle_s)
    try:
        yield
    finally:
        with _quiet:
            _timings -= 1
            _quiet.notify_all()


@contextlib.contextmanager
def between_timings(stop: threading.Event) -> Iterator[bool]:
    """A background step: waits while a timing is in progress, then yields True and counts the step as under way
    until the block ends; yields False (the step should not run, nothing counted) when `stop` is set first."""
    global _background
    with _quiet:
        while _timings and not stop.is_set():
            _quiet.wait(timeout=_POLL_S)
        admitted = not stop.is_set()
        if admitted:
            _background += 1
    try:
        yield admitted
    finally:
        if admitted:
            with _quiet:
                _background -= 1
                _quiet.notify_all()
