"""The device trials train on, resolved once from the settings (``--accelerator``, ``--devices``, ``--precision``).

``auto`` is resolved here, by one rule, and every Trainer the package builds is given the result (a concrete
accelerator: ``cpu``, ``cuda`` or ``mps``), so Lightning never resolves ``auto`` by a rule of its own that could
disagree with ours (CUDA, else Apple's MPS, else the CPU). Everything that asks "is this a GPU?" reads the one
:class:`Device`.

Example:
    >>> resolve_device("cpu", 1, "32").trainer_options()
    {'accelerator': 'cpu', 'devices': 1, 'precision': '32'}
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from syno_automl.runtime.target import SpeedTarget, parse_target

__all__ = ["Device", "resolve_device", "check_runnable_here", "why_not_runnable"]


@dataclass(frozen=True)
class Device:
    """What every trial trains on: a concrete accelerator (never ``auto`` or ``gpu``), the devices per trial, the
    precision (Lightning's names)."""

    accelerator: str   # "cpu", "cuda" or "mps"
    devices: int = 1
    precision: str = "32"

    @property
    def gpu(self) -> bool:
        return self.accelerator != "cpu"

    @property
    def cuda(self) -> bool:
        return self.accelerator == "cuda"

    def trainer_options(self) -> dict[str, Any]:
        """The keyword arguments of every ``lightning.Trainer`` of a search."""
        return {"accelerator": self.accelerator, "devices": self.devices, "precision": self.precision}

    def default_speed_target(self) -> SpeedTarget:
        """``--target auto``: the model timed where it trained, compiled on CUDA; eager on the CPU otherwise (there
        is no MPS speed target: a model trained on MPS is timed on the CPU)."""
        return SpeedTarget("cuda", "compiled") if self.cuda else SpeedTarget("cpu", "eager")


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(accelerator: str, devices: int = 1, precision: str = "32") -> Device:
    """The :class:`Device` of the settings: ``cpu``; ``gpu`` (CUDA, else MPS; SettingError where torch sees
    neither, before any study or training: Lightning would fail every trial with its own error); ``auto`` (CUDA,
    else MPS, else the CPU)."""
    import torch

    from syno_automl.errors import SettingError

    if accelerator == "cpu":
        return Device("cpu", devices, precision)
    if torch.cuda.is_available():
        return Device("cuda", devices, precision)
    if _mps_available():
        return Device("mps", devices, precision)
    if accelerator == "gpu":
        raise SettingError(f"--accelerator gpu: torch {torch.__version__} sees no GPU here "
                           f"(torch.cuda.is_available() is False); use --accelerator auto or cpu")
    return Device("cpu", devices, precision)


def why_not_runnable(target: SpeedTarget) -> str | None:
    """Why this machine cannot time `target` (a CUDA target where torch sees no CUDA device), or None when it can."""
    if not target.cuda:
        return None
    from syno_automl.runtime.cuda_presence import no_cuda_reason

    absent = no_cuda_reason()   # ruled out without torch (seconds to import) where that is certain
    if absent is not None:
        return absent
    import torch

    if torch.cuda.is_available():
        return None
    return f"torch {torch.__version__} sees no CUDA device here (torch.cuda.is_available() is False)"


def check_runnable_here(accelerator: str, speed_target: str, also_measure: Sequence[str] = ()) -> list[str]:
    """Refuses (SettingError), before any study or training, what cannot run on this machine: ``--accelerator gpu``
    where torch sees no GPU (as :func:`resolve_device` would, after the data loaded) and a ``--target`` on CUDA where
    torch sees no CUDA device (the search would run to its end and then have no speed to judge by). An
    ``--also-measure`` target on CUDA there is not refused: the final stage skips it with a note, and the returned
    warnings say so up front. Imports torch only when one of them asks for a GPU (the CPU's need no check)."""
    targets = [parse_target(speed_target)] if speed_target != "auto" else []
    also = [parse_target(t) for t in also_measure]
    if accelerator != "gpu" and not any(t.cuda for t in [*targets, *also]):
        return []
    from syno_automl.errors import SettingError

    if accelerator == "gpu":
        from syno_automl.runtime.cuda_presence import no_cuda_reason

        absent = no_cuda_reason() if not sys.platform.startswith("darwin") else None   # (a Mac's GPU is MPS)
        if absent is not None:
            raise SettingError(f"--accelerator gpu: no GPU here: {absent}; use --accelerator auto or cpu")
        resolve_device(accelerator)
    if why_not_runnable(SpeedTarget("cuda", "eager")) is None:   # torch only where the files leave it open
        return []
    for t in targets:
        why = why_not_runnable(t)
        if why:
            raise SettingError(f"--target {t}: {why}, so the final stage could not time the operators on it; use "
                               f"--target cpu.eager or cpu.compiled (auto: where trials train), or run where a CUDA "
                               f"GPU is")
    return [f"--also-measure {t}: torch sees no CUDA device here; the final stage will skip it" for t in also if t.cuda]
