"""Cost profiles: the coefficients of the planned cost on one speed target.

A target names where and how a model runs: a device (``cpu``, ``cuda``) and an execution (``eager``, or
``compiled`` with ``torch.compile``), e.g. ``cuda.compiled``. The native core counts, for each planned program, the
FLOPs it computes, the elements it materializes and the kernels it launches (one per materialization), and which
of those writes only copy a view (rolls, padding, windows, permutes). A profile prices them::

    cost = flop x FLOPs + element x elements written + read x elements read + launch x kernels

and, for a compiled target, counts the copies of one run of view steps (and the broadcast products among them,
elementwise multiplies by a weight) as the one kernel that Inductor fuses them into (the largest of them; none
before a reduction, which reads its input through the views). A profile prices a training ``step`` (forward,
backward, the weights' gradients) or an ``inference`` one (no gradients). ``cpu.eager`` is today's model (flop
1, element 256, read 0, launch 0, training), so everything without a target behaves as before.

Example:
    >>> from syno_automl.cost_profile import resolve
    >>> p = resolve("cpu.eager")
    >>> p.total({"flops": 10.0, "materialized": 2.0, "read": 2.0, "kernels": 1.0})
    522.0
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Union

from syno_automl.errors import CostProfileError
from syno_automl.runtime.target import SPEED_TARGETS, SpeedTarget, parse_target

__all__ = ["CostProfile", "FORMAT", "TARGETS", "SHIPPED", "COEFFICIENTS", "load", "resolve", "from_dict",
           "shipped_path"]

FORMAT = "syno-cost-profile/1"
TARGETS = SPEED_TARGETS
SHIPPED = ("cpu.eager", "cuda.eager", "cuda.compiled")
#: the priced quantities: one FLOP, one element materialized (written), one element read, one kernel launched
COEFFICIENTS = ("flop", "element", "read", "launch")
_TEXT_FIELDS = ("device", "torch", "date", "source")
STEPS = ("train", "inference")


@dataclass(frozen=True)
class CostProfile:
    """A target's coefficients, in one unit of its own (``seconds_per_unit`` converts it, when known)."""

    target: str
    flop: float
    element: float
    read: float
    launch: float
    device: str = "unknown"
    torch: str = "unknown"
    date: str = "unknown"
    source: str = ""
    seconds_per_unit: float | None = None
    fit: dict[str, Any] = field(default_factory=dict)  # how it was fitted (rows, residuals, correlation)
    step: str = "train"  # what the coefficients price: a training step, or an inference (forward) one

    @property
    def speed_target(self) -> SpeedTarget:
        return parse_target(self.target)

    @property
    def device_type(self) -> str:
        return self.speed_target.device

    @property
    def execution(self) -> str:
        return self.speed_target.execution

    @property
    def fuse_views(self) -> bool:
        """A compiled target fuses the copies of a run of views into one kernel (or into a reduction)."""
        return self.execution == "compiled"

    def native(self) -> dict[str, Any]:
        """The coefficients as OperatorSpace's ``cost_profile`` option takes them (native/cost.hpp)."""
        return {"flop": self.flop, "element": self.element, "read": self.read, "launch": self.launch,
                "fuse_views": self.fuse_views, "inference": self.step == "inference"}

    def total(self, counts: Mapping[str, float]) -> float:
        """The cost of a program's counts (``Operator.program()["cost"]``); the formula of native/cost.hpp."""
        flops, written, read, kernels = counts["flops"], counts["materialized"], counts["read"], counts["kernels"]
        if self.step == "inference":
            written, kernels = written - counts["gradients"], kernels - counts["gradient_kernels"]
        if not self.fuse_views:
            return self.flop * flops + self.element * written + self.read * read + self.launch * kernels
        return (self.flop * flops + self.element * (written - counts["copied"] + counts["fused_copied"])
                + self.read * (read - counts["copy_read"] + counts["fused_copied"])
                + self.launch * (kernels - counts["copy_kernels"] + counts["fused_copy_kernels"]))

    def layer_cost(self, flops: float, input_elements: float, output_elements: float,
                   weight_elements: float) -> float:
        """A Conv1d / Conv2d / Linear layer (one convolution or matmul): its FLOPs, its input and weight read, its
        output and (in training) its weight's gradient written, one kernel each -- what the conv-equivalent
        operator's plan counts."""
        gradient = self.step == "train"
        return (self.flop * flops + self.element * (output_elements + weight_elements * gradient)
                + self.read * (input_elements + weight_elements) + self.launch * (1 + gradient))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        doc: dict[str, Any] = {"format": FORMAT, "target": self.target, "step": self.step}
        doc.update({k: d[k] for k in _TEXT_FIELDS})
        doc["coefficients"] = {k: d[k] for k in COEFFICIENTS}
        if self.seconds_per_unit is not None:
            doc["seconds_per_unit"] = self.seconds_per_unit
        doc["fit"] = d["fit"]
        return doc

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


ProfileLike = Union[CostProfile, str, "os.PathLike[str]", Mapping[str, Any]]


def _number(where: str, name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CostProfileError(f"{where}: '{name}' must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise CostProfileError(f"{where}: '{name}' must be a finite {'positive' if positive else 'non-negative'} "
                               f"number, got {value!r}")
    return x


def from_dict(data: Any, where: str = "cost profile") -> CostProfile:
    """Validates a profile document (``where`` names it in errors: a file's path)."""
    if not isinstance(data, Mapping):
        raise CostProfileError(f"{where}: a cost profile is a JSON object, got a {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise CostProfileError(f"{where}: 'format' is {data.get('format')!r}, expected {FORMAT!r} (a profile of "
                               f"another version or not a cost profile)")
    target = data.get("target")
    if target not in TARGETS:
        raise CostProfileError(f"{where}: 'target' {target!r} is not a known target ({', '.join(TARGETS)})")
    coefficients = data.get("coefficients")
    if not isinstance(coefficients, Mapping):
        raise CostProfileError(f"{where}: 'coefficients' is missing (an object with {', '.join(COEFFICIENTS)})")
    values: dict[str, Any] = {}  # CostProfile's keywords, as texts below
    for name in COEFFICIENTS:
        if name not in coefficients:
            raise CostProfileError(f"{where}: 'coefficients.{name}' is missing")
        values[name] = _number(where, f"coefficients.{name}", coefficients[name])
    if not any(values.values()):
        raise CostProfileError(f"{where}: 'coefficients' are all 0 (every operator would cost nothing)")
    unknown = sorted(set(coefficients) - set(COEFFICIENTS))
    if unknown:
        raise CostProfileError(f"{where}: unknown coefficient(s) {', '.join(map(repr, unknown))} "
                               f"(known: {', '.join(COEFFICIENTS)})")
    texts: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        value = data.get(name, "unknown")
        if not isinstance(value, str):
            raise CostProfileError(f"{where}: '{name}' must be a string, got {value!r}")
        texts[name] = value
    step = data.get("step", "train")
    if step not in STEPS:
        raise CostProfileError(f"{where}: 'step' {step!r} is not one of {', '.join(STEPS)}")
    seconds = data.get("seconds_per_unit")
    if seconds is not None:
        seconds = _number(where, "seconds_per_unit", seconds, positive=True)
    fit = data.get("fit", {})
    if not isinstance(fit, Mapping):
        raise CostProfileError(f"{where}: 'fit' must be an object, got {fit!r}")
    return CostProfile(target=target, **values, **texts, seconds_per_unit=seconds, fit=dict(fit), step=step)


def load(path: str | os.PathLike[str]) -> CostProfile:
    """Reads and validates a profile file (CostProfileError naming the file and the field)."""
    where = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CostProfileError(f"{where}: cannot read the cost profile ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise CostProfileError(f"{where}: not a cost profile (not UTF-8 text: {e.reason})") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        raise CostProfileError(f"{where}: not JSON ({e})") from None
    return from_dict(data, where)


def shipped_path(target: str) -> Path:
    """The file of a profile shipped with the package (``syno_automl/profiles/<target>.json``)."""
    if target not in SHIPPED:
        raise CostProfileError(f"no shipped cost profile for {target!r} (shipped: {', '.join(SHIPPED)}; "
                               f"`calibrate` measures one for another target)")
    return Path(str(resources.files("syno_automl") / "profiles" / f"{target}.json"))


def resolve(target: ProfileLike | None) -> CostProfile | None:
    """A profile from a shipped target's name, a profile file's path, a loaded profile or its dict; None stays None
    (today's cost, which is the cpu.eager profile)."""
    if target is None or isinstance(target, CostProfile):
        return target
    if isinstance(target, Mapping):
        return from_dict(target)
    if isinstance(target, str) and target in SHIPPED:
        return load(shipped_path(target))
    if isinstance(target, (str, os.PathLike)):
        if Path(target).is_file():
            return load(target)
        raise CostProfileError(f"{os.fspath(target)!r} is neither a shipped target ({', '.join(SHIPPED)}) nor a "
                               f"cost profile file")
    raise CostProfileError(f"a cost target is a target name, a profile path or a CostProfile, got a "
                           f"{type(target).__name__}")
