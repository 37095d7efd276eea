"""One measurement request: the settings every measurement entry point takes, frozen and checked once.

Where to measure (``targets``), with which MetaSchedule budget (``trials``, ``seconds``, ``work_dir``, ``seed``,
``runner``), timed how (``protocol``, ``inductor``) and shielded how (``isolate``, ``isolate_grace_s``,
``rpc_session_timeout``, ``build_target``): :func:`~syno_automl.measure.measure_layers` hands the same request to
:func:`~syno_automl.measure.measure_operator`, which hands it to :func:`~syno_automl.measure.tune_and_time` once per
target; :func:`~syno_automl.measure.model_latency` and the model-level helpers take it too. What differs per call
stays an argument: the operator and its mapping, the model and its inputs, the layer sizes, one target of several,
a progress callback and its label.

Example::

    from syno_automl import measure
    req = measure.MeasureRequest(targets=("llvm", "cuda"), trials=64, seconds=600)
    measure.measure_layers(op, req, sizes={"N": 1})
    measure.tune_and_time(measure.conv2d_nchw_te(1, 64, 64, 56, 56, 3), "llvm", req)

This module imports neither torch nor tvm.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from syno_automl.echo import shown
from syno_automl.errors import OptionError, OptionTypeError
from syno_automl.measure.result import PROTOCOL, TimingProtocol

__all__ = ["MeasureRequest", "RUNNERS", "job_payload"]

RUNNERS = ("inprocess", "local")  # see metaschedule.make_runner


def job_payload(target: Any) -> Any:
    """A target as JSON for a child process: strings and dicts as they are, anything else (a tvm Target) as text."""
    return target if target is None or isinstance(target, (str, dict)) else str(target)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionTypeError(f"{name} must be an integer, got {shown(value)}")
    return int(value)


def _seconds(name: str, value: Any, optional: bool = True) -> float | None:
    """A duration: ``>= 0`` (or None when ``optional``), else ``> 0``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionTypeError(f"{name} must be a number of seconds{' or None' if optional else ''}, got "
                              f"{shown(value)}")
    if value < 0 or (value == 0 and not optional):
        raise OptionError(f"{name} must be {'>= 0' if optional else '> 0'}, got {shown(value)}")
    return value if isinstance(value, (int, float)) else float(value)  # another Real (numpy's): a float


@dataclass(frozen=True)
class MeasureRequest:
    """How to measure: the defaults are those every entry point had.

    ``targets``: where :func:`measure_operator`, :func:`measure_layers` and :func:`model_metrics` measure (``llvm``,
    ``cuda``, ``rpc:KEY@host:port``, ``torch``, a tvm Target or JSON dict; one target alone needs no tuple); the
    one-target entry points (:func:`tune_and_time`, :func:`model_latency`) take theirs as an argument, else the
    request's only one. ``trials``: MetaSchedule trials per kernel (per task for a model); 0: TVM's default
    schedules. ``seconds``: tuning time budget per kernel/model (soft; hard with ``isolate``). ``work_dir``: the
    tuning database folder (default :data:`~syno_automl.measure.database.DEFAULT_WORK_DIR`). ``protocol``: the
    :class:`TimingProtocol`. ``inductor``: also time the torch modules under ``torch.compile`` (layer-level
    entry points). ``isolate``: run each measurement in a child process, killed after ``seconds`` plus
    ``isolate_grace_s`` (None: 120 s for a kernel, 300 s for a model). ``runner``: ``"local"`` or
    ``"inprocess"`` (None: ``$SYNO_MS_RUNNER``, else local; see
    :func:`~syno_automl.measure.metaschedule.make_runner`). ``build_target``: what to compile for when a target is
    ``rpc:...`` (None: the host's llvm). ``rpc_session_timeout``: seconds of one RPC session.

    Raises :class:`~syno_automl.errors.OptionTypeError` / :class:`~syno_automl.errors.OptionError` for a setting
    of the wrong type or out of range; a target is checked only when measured (a bad one gives a missing latency
    with its reason, as every measurement failure)."""

    targets: tuple[Any, ...] = ("llvm",)
    trials: int = 0
    seconds: float | None = None
    work_dir: str | None = None
    protocol: TimingProtocol = PROTOCOL
    seed: int = 0
    inductor: bool = True
    isolate: bool = False
    isolate_grace_s: float | None = None
    runner: str | None = None
    build_target: Any = None
    rpc_session_timeout: float = 120.0

    def __post_init__(self) -> None:
        targets = self.targets
        # one target alone (a string, a JSON dict, a tvm Target) is a request for that target, not its characters
        if isinstance(targets, (str, bytes, Mapping)) or not isinstance(targets, Iterable):
            targets = (targets,)
        put = object.__setattr__  # frozen: the normalized values are set once, here
        put(self, "targets", tuple(targets))
        put(self, "trials", _integer("trials", self.trials))
        if self.trials < 0:
            raise OptionError(f"trials must be >= 0, got {self.trials}")
        put(self, "seconds", _seconds("seconds", self.seconds))
        if self.work_dir is not None:
            put(self, "work_dir", os.fspath(self.work_dir))
        if not isinstance(self.protocol, TimingProtocol):
            raise OptionTypeError(f"protocol must be a TimingProtocol, got {shown(self.protocol)}")
        put(self, "seed", _integer("seed", self.seed))
        put(self, "inductor", bool(self.inductor))  # the truth value the entry points always tested
        put(self, "isolate", bool(self.isolate))
        put(self, "isolate_grace_s", _seconds("isolate_grace_s", self.isolate_grace_s))
        if self.runner is not None and self.runner not in RUNNERS:
            raise OptionError(f"unknown runner {shown(self.runner)}: 'inprocess' or 'local'")
        put(self, "rpc_session_timeout", _seconds("rpc_session_timeout", self.rpc_session_timeout, optional=False))

    @property
    def target(self) -> Any:
        """The only target (for the one-target entry points when no target is passed)."""
        if len(self.targets) != 1:
            raise OptionError(f"the request has {len(self.targets)} targets ({shown(list(self.targets))}): pass the "
                              f"one to measure")
        return self.targets[0]

    def grace_s(self, default: float) -> float:
        """The ``isolate`` grace period: ``isolate_grace_s``, else the entry point's ``default``."""
        return default if self.isolate_grace_s is None else self.isolate_grace_s

    def to_job(self) -> dict[str, Any]:
        """JSON-able, for the child process of ``isolate=True``: the same request, not isolated again."""
        job = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        job.update(targets=[job_payload(t) for t in self.targets], build_target=job_payload(self.build_target),
                   protocol=dataclasses.asdict(self.protocol), isolate=False)
        return job

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> MeasureRequest:
        """The request :meth:`to_job` wrote."""
        return cls(**{**job, "targets": tuple(job["targets"]), "protocol": TimingProtocol(**job["protocol"])})
