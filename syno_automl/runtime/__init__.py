"""Where a search runs, resolved once: the device trials train on (device) and the speed targets a model is timed
on (target). Imports nothing heavy at import time (torch only inside :func:`resolve_device`)."""
from __future__ import annotations

from syno_automl.runtime.device import Device, resolve_device
from syno_automl.runtime.target import KERNEL_TARGETS, SPEED_TARGETS, SpeedTarget, parse_target

__all__ = ["Device", "resolve_device", "SpeedTarget", "SPEED_TARGETS", "KERNEL_TARGETS", "parse_target"]
