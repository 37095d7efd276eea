"""How thorough this process's timings are: ``standard`` (every protocol as written) or ``fast`` (each shortened to
a few short pairs: a figure in a fraction of the time, with a wider interval), as pyperf's ``--fast``.

Fast timing is for smoke runs and tests, where the figures' presence matters and not their precision; a verdict or
a figure to quote is timed standard. It is a process setting: ``--timing fast`` on the CLI (set once, at the entry
point, by :func:`~syno_automl.runtime.process.configure_process`) or ``$SYNO_AUTOML_TIMING=fast``, read at each
timing, so that a fresh timing process inherits it. Every figure timed fast says so in its conditions.

Example:
    >>> timing_of("fast"), timing_of(None) in TIMINGS
    ('fast', True)
"""
from __future__ import annotations

import os

from syno_automl.errors import OptionError

__all__ = ["FAST", "STANDARD", "TIMINGS", "TIMING_ENV", "fast_timing", "timing_of"]

STANDARD, FAST = "standard", "fast"
TIMINGS = (STANDARD, FAST)
#: the timing of a process where no --timing is given
TIMING_ENV = "SYNO_AUTOML_TIMING"


def timing_of(flag: str | None) -> str:
    """--timing's value (`flag`), else $SYNO_AUTOML_TIMING, else standard."""
    chosen = flag or os.environ.get(TIMING_ENV) or STANDARD
    if chosen not in TIMINGS:
        raise OptionError(f"${TIMING_ENV} must be {STANDARD!r} or {FAST!r}, got {chosen!r}")
    return chosen


def fast_timing() -> bool:
    """Whether this process times fast (read at each timing: the setting may change between them)."""
    return timing_of(None) == FAST
