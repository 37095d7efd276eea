"""Whole-model speed on a speed target, by the speed protocol (syno_automl.speed.paired): each operator's
substituted model against the original, in interleaved blocks, as a ratio with its 95 % reproducibility interval;
and a control (the original against itself) that shows the protocol's own noise under the same conditions. Several
operators are measured taking turns batch by batch (:meth:`SpeedProbe.measure_all`).

Inference (eval mode, ``torch.inference_mode``) on the subject's timing batch (:class:`SpeedSubject`), on the
target's device, eager or ``torch.compile``d once per model (the warm-up compiles, never timed), under the subject's
precision (bf16 and fp16 through ``torch.autocast``), `threads` torch threads on a CPU. A probe leaves the process
as it found it (threads restored after each timing); the steady allocator of runtime/allocator.py is the entry
points' to set (runtime/process.py), never a probe's. Every timing raises the runtime's timing signal, so that a
background prefetch of the sampler holds its work meanwhile.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from syno_automl.runtime.timing_rigor import fast_timing
from syno_automl.runtime.timing_signal import timing_in_progress
from syno_automl.speed.paired import SPEED_PROTOCOL, Conditions, PairedProtocol, SpeedupEstimate
from syno_automl.speed.setup import timing_setup
from syno_automl.speed.subject import SpeedSubject, precision_name

__all__ = ["SpeedMeasurement", "SpeedProbe", "measure_speedups", "precision_name", "substituted_model"]


@dataclass
class SpeedMeasurement:
    """What :func:`measure_speedups` found: an estimate per operator (None: could not be built or timed)."""

    label: str                                   # how it was measured, beginning with the target
    estimates: list[SpeedupEstimate | None] = field(default_factory=list)
    control: SpeedupEstimate | None = None       # the original against itself
    baseline_ms: float | None = None
    conditions: Conditions | None = None

    @property
    def measured(self) -> bool:
        return self.baseline_ms is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON, a pipe to another process)."""
        return {"label": self.label, "baseline_ms": self.baseline_ms,
                "control": self.control.to_dict() if self.control else None,
                "estimates": [e.to_dict() if e else None for e in self.estimates],
                "conditions": asdict(self.conditions) if self.conditions else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeedMeasurement:
        return cls(data["label"], [SpeedupEstimate.from_dict(e) if e else None for e in data["estimates"]],
                   SpeedupEstimate.from_dict(data["control"]) if data["control"] else None, data["baseline_ms"],
                   Conditions(**data["conditions"]) if data["conditions"] else None)



def _numerics(device: str, precision: str) -> Any:
    """The context a timed call runs in: autocast for bf16/fp16, TF32 matmuls for tf32, else none."""
    import torch

    if precision == "tf32":
        return _tf32_matmuls()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    return torch.autocast(device, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def _cuda_fp32_name() -> str:
    """How fp32 runs on CUDA here: "tf32" where cuDNN's convolutions take TF32 (PyTorch's default), and then the
    timed matmuls do too (``_tf32_matmuls``), else "fp32"."""
    import torch

    return "tf32" if torch.backends.cudnn.allow_tf32 else "fp32"


@contextlib.contextmanager
def _tf32_matmuls() -> Iterator[None]:
    """Matmuls in TF32 while a model is timed (then as before): PyTorch's defaults give cuDNN's convolutions TF32
    and matmuls full fp32, so an operator's contractions would be timed at another precision than the convolution
    they replace (on an H200 TF32's peak is about 8x fp32's)."""
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _caller(model: Any, example: Any, device: str, precision: str) -> Callable[[], Any]:
    import torch

    def call() -> Any:
        with torch.inference_mode(), _numerics(device, precision):
            return model(example)
    return call


def substituted_model(substitution: Any, op: Any, *, triton: bool = False) -> Any:
    """The substitution's model running `op` in every placeholder (fresh weights), in eval mode. An operator of
    another space (the search's, at the training's sizes, where the subject is another regime) is replayed in the
    substitution's space first: the same operator at these sizes (ValuationError where it does not exist there).
    `triton`: each placeholder runs the operator's generated Triton kernel (codegen/triton.py; the torch lowering,
    counted and logged, where the kernel cannot express it)."""
    from syno_automl.measure.substituted_model import substituted_models
    from syno_automl.placeholder import placeholders
    from syno_automl.space import Operator

    if op.space is not substitution.space:
        op = Operator.from_json(substitution.space, op.to_json())
    model = substituted_models(substitution, op)[1]
    if triton:
        from syno_automl.codegen.triton import build_triton_module

        for i, (_, placeholder) in enumerate(placeholders(model)):
            placeholder.set_operator(build_triton_module(op, i))
    return model.eval()


class SpeedProbe:
    """Times operators' substituted models against the original on one target, one operator a call: the original is
    built (and, on a compiled target, compiled) once and kept, every timing interleaves the two by `protocol`.
    ``runs`` is False where the target cannot run here (CUDA without a CUDA device): every estimate is then None.

    Example:
        >>> probe = SpeedProbe(context.speed_subject(), protocol=TRIAL_SPEED_PROTOCOL)   # doctest: +SKIP
        >>> probe.measure(op).text()                                       # doctest: +SKIP
        '1.41× [1.33, 1.49]'
    """

    def __init__(self, subject: SpeedSubject, threads: int | None = None,
                 protocol: PairedProtocol = SPEED_PROTOCOL) -> None:
        import torch

        self.subject = subject
        self.target = subject.target
        self.protocol = protocol
        self.runs = not (self.target.cuda and not torch.cuda.is_available())
        self.threads = threads or torch.get_num_threads()
        self.precision = subject.precision
        if self.target.cuda and self.precision == "fp32":
            self.precision = _cuda_fp32_name()
        self.where = (f"cpu ({self.threads} thread{'s' if self.threads > 1 else ''})" if self.target.device == "cpu"
                      else torch.cuda.get_device_name() if self.runs else "cuda (none here)")
        self.setup = timing_setup(self.target, subject.compile_mode, tuple(subject.example.shape))
        self._example: Any = None
        self._baseline: list[Callable[[], Any]] | None = None

    @property
    def example(self) -> Any:
        if self._example is None:
            self._example = self.setup.example(self.subject.example.to(self.target.device))
        return self._example

    def conditions(self) -> Conditions:
        """The conditions now (the load average changes between measurements)."""
        return Conditions.here(self.where, self.threads, self.precision, self.subject.batch_label, self.setup.text())

    def label(self) -> str:
        execution = {"eager": "eager", "compiled": "compiled", "triton": "generated Triton kernels, compiled"}
        fast = ", fast timing" if fast_timing() else ""   # a figure timed fast says so where it is quoted
        return (f"{self.target}: torch {execution[self.target.execution]} inference, "
                f"{self.subject.batch_label}, {self.where}, {self.precision}, {self.setup.text()}{fast}")

    def _call(self, model: Any) -> list[Callable[[], Any]]:
        """The protocol's copies of `model` (each its own weights and input: other addresses), each as one call in
        the timing setup; one on a compiled target (each copy would be compiled again)."""
        import copy

        model = model.to(self.target.device)
        if self.target.compiled:
            return [_caller(self.setup.model(model), self.example, self.target.device, self.precision)]
        models = [model] + [copy.deepcopy(model) for _ in range(self.protocol.copies - 1)]
        # clone keeps the setup's layout (torch.preserve_format)
        inputs = [self.example] + [self.example.clone() for _ in range(self.protocol.copies - 1)]
        return [_caller(self.setup.model(m), x, self.target.device, self.precision) for m, x in zip(models, inputs)]

    def _original(self) -> list[Callable[[], Any]]:
        if self._baseline is None:
            self._baseline = self._call(self.subject.substitution.original_model().eval())
        return self._baseline

    def _control(self) -> list[Callable[[], Any]]:
        """The original against itself: its copies in another order (each batch one copy against another)."""
        calls = self._original()
        return calls[1:] + calls[:1]

    def control(self) -> SpeedupEstimate | None:
        """The original against itself: the protocol's own noise, here and now."""
        return self._timed([self._control()])[0] if self.runs else None

    def measure(self, op: Any) -> SpeedupEstimate | None:
        """`op` substituted (fresh weights) against the original; None when it cannot be built or timed."""
        return self._timed([self._candidate(op)])[0] if self.runs else None

    def measure_all(self, ops: list[Any]) -> tuple[SpeedupEstimate | None, list[SpeedupEstimate | None]]:
        """The control and each of `ops` against the original, taking turns batch by batch (so that every figure
        meets the same moments of the machine); None for an operator that cannot be built or timed."""
        if not self.runs:
            return None, [None] * len(ops)
        estimates = self._timed([self._control(), *(self._candidate(op) for op in ops)])
        return estimates[0], estimates[1:]

    def _candidate(self, op: Any) -> list[Callable[[], Any]] | None:
        """`op` substituted (fresh weights), as the protocol's copies; None when it cannot be installed."""
        try:
            return self._call(substituted_model(self.subject.substitution, op, triton=self.target.triton))
        except Exception:  # noqa: BLE001 -- an operator that cannot be installed: unmeasured
            return None

    def _timed(self, candidates: list[list[Callable[[], Any]] | None]) -> list[SpeedupEstimate | None]:
        """Each candidate (None: not built) against the original by the protocol, in turns; all None when the
        original itself fails to run."""
        import torch

        from syno_automl.measure.timing import torch_threads
        from syno_automl.speed.paired import paired_speedups

        runnable = [c for c in candidates if c is not None]
        sync = torch.cuda.synchronize if self.target.cuda else (lambda: None)
        try:
            with timing_in_progress(), torch_threads(self.threads), self.setup.running():
                timed = iter(paired_speedups(self._original(), runnable, self.protocol, sync=sync,
                                             conditions=self.conditions()))
        except Exception:  # noqa: BLE001 -- the original fails to run: nothing is measured
            return [None] * len(candidates)
        return [next(timed) if c is not None else None for c in candidates]


def measure_speedups(subject: SpeedSubject, ops: list[Any], threads: int | None = None,
                     protocol: PairedProtocol = SPEED_PROTOCOL) -> SpeedMeasurement:
    """Each of `ops` substituted, timed against the original model on the subject's target, and the control.
    Never raises: a model that cannot be built or timed gets None."""
    probe = SpeedProbe(subject, threads, protocol)
    if not probe.runs:
        return SpeedMeasurement(f"{probe.target}: not timed (no CUDA device here)", [None] * len(ops))
    result = SpeedMeasurement(probe.label(), conditions=probe.conditions())
    result.control, result.estimates = probe.measure_all(ops)
    if result.control is not None:
        result.baseline_ms = result.control.baseline_ms
    return result
