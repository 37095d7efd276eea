"""Timing for bench/gpu_window.py (torch only): synchronized block timing with CUDA events, the candidates
interleaved round by round in alternating order, ratios with the Student-t interval over the paired rounds, a
control (the baseline against itself), the roofline floor that flags impossible times, and the strongest baseline's
settings (``strongest_baseline``), recorded in every row's conditions.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

# two-sided 95 % Student-t quantiles by degrees of freedom (1.96 beyond the table)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}
# dense peaks the hardware cannot beat (vendor figures; bf16 dense tensor core, HBM): a time below the floor they
# give is a timing bug (unsynchronized, elided or cached work), never a fast kernel
NOMINAL = {"H200": (989.0, 4800.0), "H100": (989.0, 3350.0), "A100": (312.0, 2039.0)}


def t95(df: int) -> float:
    if df <= 0:
        return math.inf
    keys = [k for k in sorted(_T95) if k >= df]
    return _T95[keys[0]] if keys else 1.96


@dataclass(frozen=True)
class Baseline:
    """The settings both sides of a comparison run under (issue 45 item 3): the strongest on this stack by default."""

    channels_last: bool = True
    cudnn_benchmark: bool = True
    dtype: str = "bf16"             # "bf16": the model's weights and input in bfloat16; "fp32": TF32 allowed
    compile_mode: str | None = "max-autotune"   # None: eager; "default"; "max-autotune" (CUDA graphs included)

    def conditions(self) -> dict[str, Any]:
        return {**asdict(self), "cuda_graphs": self.compile_mode == "max-autotune",
                "tf32": self.dtype == "fp32"}


def strongest_baseline(batch: int) -> Baseline:
    """Channels-last, cudnn.benchmark, bf16 and torch.compile's max-autotune, which captures CUDA graphs (the
    launch-bound small batches need them; at large batch they cost nothing)."""
    del batch  # the same settings at every batch: max-autotune's CUDA graphs serve the small ones
    return Baseline()


def apply_settings(b: Baseline) -> None:
    torch.backends.cudnn.benchmark = b.cudnn_benchmark
    torch.backends.cuda.matmul.allow_tf32 = b.dtype == "fp32"
    torch.backends.cudnn.allow_tf32 = b.dtype == "fp32"


def prepared(model: torch.nn.Module, x: torch.Tensor, b: Baseline, device: torch.device,
             compile_ok: bool = True) -> tuple[Callable[[], Any], torch.Tensor]:
    """(a no-argument call of the model under ``b``, the input it takes): eval mode, no grad."""
    apply_settings(b)
    dtype = torch.bfloat16 if b.dtype == "bf16" else torch.float32
    fmt = torch.channels_last if b.channels_last else torch.contiguous_format
    model = model.to(device=device, dtype=dtype, memory_format=fmt).eval()
    x = x.to(device=device, dtype=dtype).contiguous(memory_format=fmt)
    fn: Callable[[torch.Tensor], Any] = model
    if b.compile_mode is not None and compile_ok:
        fn = torch.compile(model, mode=None if b.compile_mode == "default" else b.compile_mode)
    graphs = b.compile_mode == "max-autotune" and device.type == "cuda"

    @torch.no_grad()
    def call() -> Any:
        if graphs:  # each call a new CUDA-graph step: the outputs of the previous one are not kept
            torch.compiler.cudagraph_mark_step_begin()
        return fn(x)

    return call, x


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def block_ms(fn: Callable[[], Any], calls: int, device: torch.device) -> float:
    """Milliseconds per call over a block of ``calls`` calls, synchronized (CUDA events on a GPU)."""
    sync(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e3 / calls


def interleaved(fns: dict[str, Callable[[], Any]], device: torch.device, rounds: int, block_s: float,
                warmup: int = 3) -> dict[str, list[float]]:
    """Per name, the ms per call of each round: every round times each function's block once, the order reversed
    every other round (A B C, C B A, ...), so that drift meets all of them alike."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        one = max(block_ms(fn, 1, device), 1e-3)
        calls[name] = max(1, min(10_000, int(block_s * 1e3 / one)))
    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(block_ms(fns[name], calls[name], device))
    return out


def ratio(base: list[float], cand: list[float]) -> dict[str, float]:
    """The speedup base / cand (geometric mean over paired rounds) with its 95 % t-interval."""
    logs = [math.log(b / c) for b, c in zip(base, cand)]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return {"speedup": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half),
            "rounds": len(logs)}


def summary(samples: list[float]) -> dict[str, float]:
    return {"ms": statistics.median(samples), "ms_min": min(samples), "ms_max": max(samples)}


@dataclass(frozen=True)
class Roofs:
    """The ceilings a time is checked against: TFLOP/s and GB/s (the larger of measured and nominal)."""

    tflops: float
    gbs: float
    source: str

    def floor_ms(self, flops: float, nbytes: float) -> float:
        return max(flops / (self.tflops * 1e12), nbytes / (self.gbs * 1e9)) * 1e3

    def check(self, ms: float, flops: float, nbytes: float) -> dict[str, Any]:
        floor = self.floor_ms(flops, nbytes)
        return {"flops": flops, "bytes": nbytes, "floor_ms": floor, "roofs": self.source, "below_roofline": ms < floor,
                **({"timing_bug": f"{ms:.4g} ms is below the roofline's {floor:.4g} ms"} if ms < floor else {})}


def roofs_for(device: torch.device, measured_tflops: float, measured_gbs: float) -> Roofs:
    """A time under the floor of these ceilings is impossible: on a known GPU the vendor's peaks (or the measured
    figures if higher); on another GPU four times the measured ones; on a CPU (the dry run) 10 TFLOP/s and
    1 TB/s, which no CPU reaches (the dry run's tiny roofs say nothing of a CPU's peak)."""
    if device.type != "cuda":
        return Roofs(max(10.0, measured_tflops), max(1000.0, measured_gbs), "cpu ceiling")
    name = torch.cuda.get_device_name(device)
    for key, (tf, gb) in NOMINAL.items():
        if key in name:
            return Roofs(max(tf, measured_tflops), max(gb, measured_gbs), f"nominal {key}")
    return Roofs(4 * measured_tflops, 4 * measured_gbs, "4x measured")


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[Callable[[], bool]]:
    """``expired()`` becomes true after ``seconds``: a step stops starting rows then, and says so."""
    end = time.monotonic() + seconds
    yield lambda: time.monotonic() > end
