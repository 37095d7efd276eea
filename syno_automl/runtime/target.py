"""Speed targets: where and how a model runs (``cpu.eager``, ``cuda.compiled``...), the one list of them and the one
parser of their names.

A target is ``<device>.<execution>``: a device (``cpu``, ``cuda``) and an execution (``eager``; ``compiled`` with
``torch.compile``; ``triton``, on CUDA only: each operator as its one generated Triton kernel, codegen/triton.py,
inside the ``torch.compile``d model). Kernel sources add TVM's (``tvm.llvm``, ``tvm.cuda``: TVM is the device, its
target kind the execution).

Example:
    >>> t = parse_target("cuda.compiled")
    >>> t.device, t.execution, t.compiled, str(t)
    ('cuda', 'compiled', True, 'cuda.compiled')
"""
from __future__ import annotations

from dataclasses import dataclass

from syno_automl.errors import OptionError

__all__ = ["SpeedTarget", "SPEED_TARGETS", "KERNEL_TARGETS", "DEVICES", "EXECUTIONS", "parse_target"]

DEVICES = ("cpu", "cuda")
EXECUTIONS = ("eager", "compiled", "triton")
# Triton has no CPU backend (its interpreter checks kernels, it does not time them): no cpu.triton
SPEED_TARGETS = ("cpu.eager", "cpu.compiled", "cuda.eager", "cuda.compiled", "cuda.triton")
KERNEL_TARGETS = SPEED_TARGETS + ("tvm.llvm", "tvm.cuda")


@dataclass(frozen=True)
class SpeedTarget:
    """A parsed target name: its device and its execution."""

    device: str
    execution: str

    @property
    def name(self) -> str:
        return f"{self.device}.{self.execution}"

    @property
    def compiled(self) -> bool:
        """Timed through ``torch.compile`` (Inductor fuses a run of views into one kernel; a Triton target's model
        is compiled around its generated kernels)."""
        return self.execution in ("compiled", "triton")

    @property
    def triton(self) -> bool:
        """Each operator runs as its generated Triton kernel (codegen/triton.py)."""
        return self.execution == "triton"

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def __str__(self) -> str:
        return self.name


def parse_target(name: str, known: tuple[str, ...] = SPEED_TARGETS) -> SpeedTarget:
    """The target `name` names; OptionError (a ValueError) when it is not one of `known` (callers check membership
    first where they owe the user their own error type and words)."""
    if name not in known:
        raise OptionError(f"unknown target {name!r} (one of {', '.join(known)})")
    device, execution = name.split(".")
    return SpeedTarget(device, execution)
