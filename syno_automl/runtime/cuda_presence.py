"""Whether this machine certainly has no CUDA device, told without importing torch (3-15 s on a loaded machine): a
CUDA speed or latency target asked for where none can run is refused at once. Reads what is cheap and sure: torch
itself when it is already imported (the judge then), ``CUDA_VISIBLE_DEVICES`` hiding every GPU, the installed
torch's build (``torch/version.py``, read as text: a ``+cpu`` build has ``cuda = None``), and on Linux the NVIDIA
driver's device files (``/dev/nvidia0``..., ``/proc/driver/nvidia/gpus/``; WSL's ``/dev/dxg``). When none of them
rules CUDA out, the answer is "maybe" (None), and torch confirms where it matters.

Example:
    >>> reason = no_cuda_reason()   # e.g. 'no CUDA device here (torch 2.13.0+cpu is built without CUDA)', or None
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import sys
from pathlib import Path

__all__ = ["no_cuda_reason", "torch_build"]


def torch_build() -> tuple[str, str | None, str | None] | None:
    """(version, CUDA version or None, HIP version or None) of the installed torch, read from its version.py
    without importing it; None when torch is not installed or the file does not say."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    try:
        text = (Path(spec.origin).parent / "version.py").read_text()
    except OSError:
        return None

    def field(name: str) -> str | None:
        found = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(.+)$", text, re.M)
        value = found.group(1).strip() if found else "None"
        return None if value == "None" else value.strip("'\"")

    version = field("__version__")
    return (version, field("cuda"), field("hip")) if version else None


def no_cuda_reason() -> str | None:
    """Why no CUDA device can be used here (one phrase, saying "no CUDA device"), or None when one may be."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda"):   # already loaded: it is the judge
        if torch.cuda.is_available():
            return None
        return f"torch {torch.__version__} sees no CUDA device here (torch.cuda.is_available() is False)"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"no CUDA device here (CUDA_VISIBLE_DEVICES={visible!r} hides every GPU)"
    build = torch_build()
    if build is not None and build[1] is None and build[2] is None:
        return f"no CUDA device here (torch {build[0]} is built without CUDA)"
    if build is not None and build[2] is not None:
        return None   # ROCm: its devices are not NVIDIA's files
    if sys.platform.startswith("linux") and not (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/dxg")
                                                 or glob.glob("/proc/driver/nvidia/gpus/*")):
        return "no CUDA device here (no NVIDIA GPU: no /dev/nvidia* device, no /proc/driver/nvidia/gpus)"
    return None
