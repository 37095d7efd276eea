"""How both sides of a speed figure run: the strongest setting a user of that target would deploy, the same for the
original model and for every operator's.

On a CUDA target that is (docs/reference: PyTorch's performance guide, the MLPerf rules; gpu-speed notes §3):

* **channels-last** for image models (cuDNN's tensor-core convolutions run in NHWC; NCHW pays a transpose before
  and after every convolution);
* **cudnn.benchmark** on while timing (cuDNN picks the fastest algorithm for each shape, in the warm-up);
* the **compile mode** of ``torch.compile`` on a compiled target (``default`` or ``max-autotune``, the subject's),
  with **CUDA graphs** at small batch (``max-autotune`` captures them itself; ``default`` becomes
  ``reduce-overhead`` at a batch of :data:`SMALL_BATCH` or less, where launches dominate);
* the precision the subject names (bf16 and fp16 through autocast: speed/probe.py).

On the CPU the model runs as it is (contiguous: oneDNN picks its own layout), compiled in the subject's mode.
Every choice is recorded in the figure's conditions (:meth:`TimingSetup.text`).

Example:
    >>> from syno_automl.runtime import parse_target
    >>> timing_setup(parse_target("cuda.compiled"), "default", (1, 3, 224, 224)).text()
    'channels-last, cudnn.benchmark, torch.compile reduce-overhead (CUDA graphs)'
    >>> timing_setup(parse_target("cpu.eager"), "default", (64, 1, 8, 8)).text()
    'contiguous, eager'
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from syno_automl.errors import OptionError
from syno_automl.runtime import SpeedTarget

__all__ = ["COMPILE_MODES", "SMALL_BATCH", "TimingSetup", "timing_setup"]

COMPILE_MODES = ("default", "max-autotune")
#: at or below this batch a CUDA model is launch-bound: CUDA graphs replay its kernels without the CPU's launches
SMALL_BATCH = 32


@dataclass(frozen=True)
class TimingSetup:
    """How a model is run for timing: layout, cuDNN autotuning, the ``torch.compile`` mode (None: eager)."""

    channels_last: bool
    cudnn_benchmark: bool
    compile_mode: str | None     # torch.compile's mode: "default", "reduce-overhead", "max-autotune"; None: eager

    @property
    def cuda_graphs(self) -> bool:
        return self.compile_mode in ("reduce-overhead", "max-autotune")

    def text(self) -> str:
        parts = ["channels-last" if self.channels_last else "contiguous"]
        if self.cudnn_benchmark:
            parts.append("cudnn.benchmark")
        if self.compile_mode is None:
            parts.append("eager")
        else:
            parts.append(f"torch.compile {self.compile_mode}" + (" (CUDA graphs)" if self.cuda_graphs else ""))
        return ", ".join(parts)

    def model(self, model: Any) -> Any:
        """`model` in this setup's layout (on its device already), compiled in its mode when it has one."""
        import torch

        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if self.compile_mode is None:
            return model
        mode = None if self.compile_mode == "default" else self.compile_mode
        return torch.compile(model, dynamic=False, mode=mode)

    def example(self, example: Any) -> Any:
        """The timing batch in this setup's layout."""
        import torch

        return example.contiguous(memory_format=torch.channels_last) if self.channels_last else example

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """cuDNN's autotuning on while the block times (then as before: a library call leaves the process as it
        found it)."""
        import torch

        before = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.cudnn_benchmark or before
        try:
            yield
        finally:
            torch.backends.cudnn.benchmark = before


def timing_setup(target: SpeedTarget, compile_mode: str, shape: Sequence[int]) -> TimingSetup:
    """The strongest setup of `target` for a timing batch of `shape` (module docstring)."""
    if compile_mode not in COMPILE_MODES:
        raise OptionError(f"compile_mode must be one of {', '.join(COMPILE_MODES)}, got {compile_mode!r}")
    mode: str | None = None
    if target.compiled:
        mode = compile_mode
        if target.cuda and mode == "default" and int(shape[0]) <= SMALL_BATCH:
            mode = "reduce-overhead"
    return TimingSetup(channels_last=target.cuda and len(shape) == 4, cudnn_benchmark=target.cuda,
                       compile_mode=mode)
