"""The measurement store: every speed measurement a search took, kept in its study, so that another worker and a
``--resume`` reuse it rather than measure again.

A measurement is keyed by what it depends on: the operator (its hash; ``baseline`` for the control, the original
against itself), the sizes (the timed batch's shape and the replaced layers' mappings), the speed target, the
precision, the device (its name as timed, with the CPU's model on a CPU) and the torch version. Each is one study
system attribute ``syno:measurement:<digest of the key>`` (one row each: two workers never overwrite each other's),
holding the key, the estimate with its conditions, and the trial that took it. The trial's MLflow run has the same
figures (study/trial_speed.py). The final stage does not read the store: its timing is the verdict's own.

Example:
    >>> import optuna
    >>> from dataclasses import replace
    >>> from syno_automl.speed.paired import SpeedupEstimate
    >>> store = MeasurementStore(optuna.create_study())
    >>> key = MeasurementKey("ab12", "[64, 1, 8, 8]", "cpu.eager", "fp32", "cpu (1 thread)", "2.5.1")
    >>> store.put(Measurement(key, SpeedupEstimate(1.4, 1.3, 1.5, 6, 2.0, 1.43), trial=3))
    >>> store.get(key).trial, store.get(replace(key, precision="bf16"))
    (3, None)
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import optuna

from syno_automl import vocabulary as V
from syno_automl.optuna_private import storage_of, study_id_of
from syno_automl.speed.paired import SpeedupEstimate

__all__ = ["MeasurementKey", "Measurement", "MeasurementStore", "sizes_of", "cpu_name"]


@dataclass(frozen=True)
class MeasurementKey:
    """What a speed measurement depends on: the same key, the same figure (up to the protocol's noise)."""

    operator: str    # the operator's hash; "baseline" for the control
    sizes: str       # JSON: the timed batch's shape and the replaced layers' mappings
    target: str      # "cpu.eager", "cuda.compiled" ...
    precision: str   # "fp32", "bf16", "fp16"
    device: str      # "cpu (1 thread), <CPU model>", or the GPU's name
    torch: str

    def digest(self) -> str:
        """16 hex digits of the key's SHA-256: its name in the study."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Measurement:
    """One stored measurement: its key, the estimate (with its conditions) and the trial that took it."""

    key: MeasurementKey
    estimate: SpeedupEstimate
    trial: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key.to_dict(), "estimate": self.estimate.to_dict(), "trial": self.trial}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        trial = data.get("trial")
        return cls(MeasurementKey(**data["key"]), SpeedupEstimate.from_dict(data["estimate"]),
                   None if trial is None else int(trial))


class MeasurementStore:
    """The measurements of one study (its system attributes ``syno:measurement:*``)."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    def _attrs(self) -> dict[str, Any]:
        return storage_of(self.study).get_study_system_attrs(study_id_of(self.study))

    def get(self, key: MeasurementKey) -> Measurement | None:
        """The stored measurement of `key`, or None (none, or one that no longer reads)."""
        found = self._attrs().get(V.SYS_MEASUREMENT + key.digest())
        try:
            return Measurement.from_dict(found) if isinstance(found, Mapping) else None
        except (KeyError, TypeError, ValueError):   # written by another version: measured again
            return None

    def put(self, measurement: Measurement) -> None:
        name = V.SYS_MEASUREMENT + measurement.key.digest()
        storage_of(self.study).set_study_system_attr(study_id_of(self.study), name, measurement.to_dict())

    def all(self) -> list[Measurement]:
        """Every stored measurement that reads, in the order of their digests."""
        out = []
        for name, data in sorted(self._attrs().items()):
            if name.startswith(V.SYS_MEASUREMENT) and isinstance(data, Mapping):
                try:
                    out.append(Measurement.from_dict(data))
                except (KeyError, TypeError, ValueError):
                    continue
        return out


def sizes_of(shape: Any, mappings: Any) -> str:
    """The key's sizes: the timed batch's shape and the replaced layers' mappings, as canonical JSON.

    Example:
        >>> sizes_of((64, 1, 8, 8), [{"C_in": 8, "H": 8}])
        '{"mappings": [{"C_in": 8, "H": 8}], "shape": [64, 1, 8, 8]}'
    """
    return json.dumps({"shape": [int(n) for n in shape], "mappings": [dict(m) for m in mappings]}, sort_keys=True)


def cpu_name() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else the platform's word for it: measurements taken on two
    different CPUs are not one measurement."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"
