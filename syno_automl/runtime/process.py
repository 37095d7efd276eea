"""Process-wide settings, set once by an entry point and never inside a library call.

Three settings make a search's process steady, and each belongs to whoever owns the process (a fourth, how
thorough its timings are, is runtime.timing_rigor's):

* torch's intra-op threads: the embedded tasks' tiny models train 50x slower with 2 threads than with 1 on a busy
  2-core machine (the threads contend);
* the steady allocator (:mod:`~syno_automl.runtime.allocator`): glibc's mmap threshold fixed, so that a CPU
  model's timed speed no longer depends on what the process allocated before;
* the heap frozen once the study is open (``gc.freeze``): a full pass of the cyclic collector over the ~450,000
  objects a search holds takes 230 ms or more, and a worker's first decision triggers one.

The CLI (``syno-automl``), :func:`~syno_automl.study.run_search` and the final stage's fresh timing process call
:func:`configure_process`; ``open_study``, ``prepare`` and ``SpeedProbe`` leave the caller's process as they found
it (tests/study/test_process_settings.py checks it). Imports nothing heavy: torch only when threads are set.

Example:
    >>> settings = configure_process(allocator=False)   # nothing asked: nothing changed
    >>> settings.threads is None and not settings.heap_frozen
    True
"""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass

from syno_automl.runtime.allocator import steady_allocator

__all__ = ["ProcessSettings", "configure_process"]

_heap_frozen = False


@dataclass(frozen=True)
class ProcessSettings:
    """What :func:`configure_process` set: the torch threads (None: left as they were), whether the allocator is
    the steady one (False: not asked, or not glibc), whether the heap is frozen (by this call or an earlier one)."""

    threads: int | None
    steady_allocator: bool
    heap_frozen: bool


def configure_process(*, threads: int | None = None, allocator: bool = True, freeze_heap: bool = False,
                      timing: str | None = None) -> ProcessSettings:
    """Sets this process up for a search or a timing: torch's intra-op `threads` (None: unchanged), the steady
    `allocator`, `freeze_heap` (once a process: what it holds now leaves the collector's full passes; frozen
    objects are still freed when nothing refers to them, only a reference cycle among them never would be) and
    `timing` (runtime.timing_rigor: "standard" or "fast"; None: as $SYNO_AUTOML_TIMING says; set there, so that a
    fresh timing process inherits it)."""
    global _heap_frozen
    if timing is not None:
        from syno_automl.runtime.timing_rigor import TIMING_ENV, timing_of

        os.environ[TIMING_ENV] = timing_of(timing)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    steady = steady_allocator() if allocator else False
    if freeze_heap and not _heap_frozen:
        _heap_frozen = True
        gc.freeze()
    return ProcessSettings(threads, steady, _heap_frozen)
