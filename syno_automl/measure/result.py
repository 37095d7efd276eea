"""What a measurement returns: :class:`Latency`, the timing protocol, speedups, schedule labels and failure notes.

Timing protocol (the ONE protocol every number of this project uses; :data:`PROTOCOL`)
--------------------------------------------------------------------------------------
1. build the kernel (tuned schedule from the on-disk database, or TVM's default schedule when
   ``trials == 0``) and allocate random fp32 inputs once;
2. warm-up: ``warmup`` plain calls (first-touch of memory, thread-pool spin-up, lazy loading; for
   ``torch.compile`` also the compilation, never timed);
3. ``repeat`` measurements, each the mean of ``number`` back-to-back calls, ``number`` raised until one
   measurement lasts at least ``min_repeat_ms`` (so tiny kernels are not timer-bound);
4. report ``median_ms`` = median of the ``repeat`` measurements and ``spread_ms`` = their inter-quartile
   range (q75 - q25); ``samples_ms`` keeps them all.

Never-raise contract: a measurement that fails returns a :class:`Latency` with ``median_ms=None`` and the stage
and reason in ``note`` (:func:`failed_at`). This module imports neither torch nor tvm.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from syno_automl import vocabulary as V

__all__ = ["TimingProtocol", "PROTOCOL", "Latency", "summarize", "speedup", "error_note", "failed_at", "UNTUNED",
           "schedules_label", "schedules_tag", "stored_entry", "slug", "latency_metrics"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimingProtocol:
    """See the module docstring. ``number`` is a floor: ``min_repeat_ms`` may raise it."""

    warmup: int = 1
    number: int = 10
    repeat: int = 15
    min_repeat_ms: int = 50

    def as_asked(self) -> TimingProtocol:
        """The protocol this process times by: this one, or under fast timing (runtime.timing_rigor) one warm-up and 5
        measurements of 3 calls at least, each lasting 5 ms at least."""
        from syno_automl.runtime.timing_rigor import fast_timing

        if not fast_timing():
            return self
        return dataclasses.replace(self, warmup=min(self.warmup, 1), number=min(self.number, 3),
                                   repeat=min(self.repeat, 5), min_repeat_ms=min(self.min_repeat_ms, 5))


PROTOCOL = TimingProtocol()


@dataclass
class Latency:
    median_ms: float | None
    spread_ms: float | None  # inter-quartile range of the per-repeat means
    repeats: int
    target: str
    tuned_trials: int
    note: str = ""
    samples_ms: list[float] = field(default_factory=list)
    reused: bool = False  # the tuning records came from the on-disk database, no new trial was run
    tuning_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.median_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Latency:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def failed(cls, target: str, note: str, tuned_trials: int = 0, tuning_s: float | None = None) -> Latency:
        return cls(None, None, 0, target, tuned_trials, note, tuning_s=tuning_s)

    @classmethod
    def of_samples(cls, samples_ms: Sequence[float], target: str, tuned_trials: int = 0, note: str = "",
                   reused: bool = False, tuning_s: float | None = None) -> Latency:
        """Step 4 of the protocol: median and inter-quartile range of the per-repeat means."""
        med, iqr = summarize(samples_ms)
        return cls(med, iqr, len(samples_ms), target, tuned_trials, note, list(samples_ms), reused, tuning_s)


def summarize(samples_ms: Sequence[float]) -> tuple[float, float]:
    """(median, inter-quartile range) of the per-repeat means."""
    arr = np.asarray(samples_ms, dtype=np.float64)
    q25, q50, q75 = np.percentile(arr, [25, 50, 75])
    return float(q50), float(q75 - q25)


def speedup(baseline: Latency, operator: Latency) -> float | None:
    """``baseline / operator`` (> 1: the operator is faster), None when either is missing."""
    base, op = baseline.median_ms, operator.median_ms  # None: missing (not ``ok``)
    if base is None or op is None or op <= 0:
        return None
    return base / op


def error_note(stage: str, exc: BaseException) -> str:
    """``stage: ExceptionType: last line of the message`` (at most 500 characters): every recorded failure."""
    text = str(exc).strip()
    return f"{stage}: {type(exc).__name__}: {text.splitlines()[-1][:500] if text else ''}"


def failed_at(name: str, stage: str, exc: BaseException, tuned_trials: int = 0, tuning_s: float | None = None,
              what: str = "latency") -> Latency:
    """Inside an ``except``: the Latency of a measurement that failed at ``stage``; with the debugging aid
    ``SYNO_LATENCY_RAISE=1`` the exception propagates instead."""
    if os.environ.get("SYNO_LATENCY_RAISE") == "1":
        raise  # the exception being handled by the caller
    _log.debug("%s failed at %s", what, stage, exc_info=True)
    return Latency.failed(name, error_note(stage, exc), tuned_trials, tuning_s)


UNTUNED = "untuned default schedules (no MetaSchedule trials)"
EAGER = "eager PyTorch (no compilation, no tuning)"


def schedules_label(trials: int, seconds: float | None = None, eager: bool = False) -> str:
    """How the kernels of a measurement were scheduled, for printed lines and stored results: ``trials == 0``
    gives :data:`UNTUNED` (never to be passed off as a tuned latency), ``eager`` gives :data:`EAGER`."""
    if eager:
        return EAGER
    if int(trials) <= 0:
        return UNTUNED
    return f"MetaSchedule, {int(trials)} trials per kernel" + (f", {seconds:g} s budget per kernel" if seconds else "")


def schedules_tag(trials: int, eager: bool = False) -> str:
    """The short form every printed or logged speedup carries: ``untuned``, ``tuned 64 trials`` or ``eager``.
    Operator and replaced layer are always measured under the same one."""
    if eager:
        return "eager"
    return "untuned" if int(trials) <= 0 else f"tuned {int(trials)} trials"


def stored_entry(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What a study keeps of one device's ``measure_layers`` summary (``syno.latency`` attrs, read by the
    report): totals, how the kernels were scheduled, and the Inductor totals when measured."""
    entry = {k: summary.get(k) for k in ("latency_ms", "baseline_ms", "speedup", "tuned_trials", "schedules",
                                         "seconds")}
    if summary.get("tag"):
        entry["tag"] = summary["tag"]
    entry.update({k: summary[k] for k in ("inductor_ms", "inductor_baseline_ms", "inductor_speedup")
                  if summary.get(k) is not None})
    return entry


def slug(name: str) -> str:
    """``name`` as a file-name part (work-dir folders, artifact names)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


def latency_metrics(devices: Mapping[str, Mapping[str, Any]], role: str = "operator") -> dict[str, float | None]:
    """MLflow metrics of ``measure_layers``' per-device summaries (``result["devices"]``): for each ``<device>``,
    ``latency_ms.<device>`` (the operator), ``baseline_latency_ms.<device>`` (the layers it replaces) and
    ``speedup.<device>``, the same three for ``inductor-<device>`` when Inductor was measured.

    ``role="baseline"``: the metrics of the baseline trial's own run, whose "operator" IS the replaced layers:
    ``latency_ms.<device>`` = ``baseline_latency_ms.<device>`` and ``speedup.<device>`` = 1 (so that MLflow's
    compare view shows the baseline beside the operators)."""
    out: dict[str, float | None] = {}
    for dev, s in devices.items():
        kinds = [(dev, "latency_ms", "baseline_ms", "speedup")]
        if "inductor_ms" in s:
            kinds.append((V.INDUCTOR + dev, "inductor_ms", "inductor_baseline_ms", "inductor_speedup"))
        for mdev, op_key, base_key, sp_key in kinds:
            base = s.get(base_key)
            if role == "baseline":
                out[V.latency_metric(mdev)] = base
                out[V.baseline_latency_metric(mdev)] = base
                out[V.speedup_metric(mdev)] = 1.0 if base is not None else None
            else:
                out[V.latency_metric(mdev)] = s.get(op_key)
                out[V.baseline_latency_metric(mdev)] = base
                out[V.speedup_metric(mdev)] = s.get(sp_key)
    return out
