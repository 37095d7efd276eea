"""Speed: what a speed figure is, in one room (as pyperf keeps its runner, manager, worker and records together).

Every speed figure of the project (a trial's, the final stage's, ``reevaluate``'s, a bench's) is a ratio against
the original model, measured by one protocol, with its interval and its conditions:

* :mod:`~syno_automl.speed.subject`: :class:`SpeedSubject`, the frozen record everything that times takes (the
  substitution, the timing batch and its label, the precision, the target; a recipe to rebuild it elsewhere);
* :mod:`~syno_automl.speed.paired`: THE protocol (interleaved blocks, batch means, copies, the reproducibility
  interval): :class:`PairedProtocol`, :class:`SpeedupEstimate`, :class:`Conditions`, :func:`paired_speedups`;
* :mod:`~syno_automl.speed.pooled`: sessions pooled into one figure, and the run drift;
* :mod:`~syno_automl.speed.probe`: :class:`SpeedProbe` (a subject's operators against its original, on its target)
  and :class:`SpeedMeasurement`;
* :mod:`~syno_automl.speed.process`: the same in a fresh process (``spawn``), the subject rebuilt by its recipe;
* :mod:`~syno_automl.speed.sessions`: the final stage's sessions (fresh processes, or this one), pooled;
* :mod:`~syno_automl.speed.store`: the measurement store (a study's system attributes, keyed by what a figure
  depends on).

The steady allocator and the other process settings are an entry point's (:mod:`syno_automl.runtime.process`);
the "a timing is in progress" signal a prefetch waits on is :mod:`syno_automl.runtime.timing_signal`. The study
wing builds subjects (``SearchContext.speed_subject``) and records figures on trials (``study/trial_speed.py``);
``measure/`` times TVM kernels and compares them with torch through this protocol. Nothing here imports the
study wing.

Example (a fake clock: the baseline takes 2 ms a call, the candidate 1 ms):
    >>> from syno_automl.speed.paired import paired_speedup
    >>> now = [0.0]
    >>> def baseline(): now[0] += 0.002
    >>> def candidate(): now[0] += 0.001
    >>> paired_speedup(baseline, candidate, clock=lambda: now[0]).text()
    '2.00× [2.00, 2.00]'
"""
from __future__ import annotations
