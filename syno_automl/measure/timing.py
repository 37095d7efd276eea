"""Timing TVM modules (local or on an RPC board: :func:`time_main`) by TVM's protocol
(:data:`~syno_automl.measure.result.PROTOCOL`), and torch modules: an operator against the layer it replaces by
the project's one speed protocol (:func:`time_torch_pair`: :mod:`syno_automl.speed.paired`, interleaved, a ratio
with its interval), a module alone by the same warm-up and calibration (:func:`time_torch`).

Both: warm-up calls first (never timed: for ``torch.compile`` this is where Inductor compiles), then ``repeat``
measurements of ``number`` back-to-back calls, ``number`` raised until one measurement lasts ``min_repeat_ms``;
median and inter-quartile range of the per-measurement means. TVM uses its ``time_evaluator``; torch has none, so
the same calibration is written out here with ``time.perf_counter``. Torch runs with the thread count of TVM's
runtime (:func:`torch_threads`), so that both sides use the same cores.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from syno_automl.measure.result import PROTOCOL, Latency, TimingProtocol
from syno_automl.measure.target import TargetSpec
from syno_automl.runtime.timing_signal import timing_in_progress
from syno_automl.speed.paired import SPEED_PROTOCOL, PairedProtocol, SpeedupEstimate, paired_speedup

__all__ = ["time_main", "random_args", "upload_remote", "time_remote", "time_torch", "time_torch_pair",
           "torch_threads"]


def random_args(func, dev, seed: int = 0) -> list:
    """Random fp32 inputs for every argument of ``func`` but the last (the output, left empty)."""
    import tvm

    from syno_automl.codegen.tvm import arg_shapes

    rng = np.random.default_rng(seed)
    args = []
    shapes = arg_shapes(func)
    for i, (shape, dtype) in enumerate(shapes):
        if i == len(shapes) - 1:
            args.append(tvm.runtime.empty(shape, dtype, dev))
        else:
            args.append(tvm.runtime.tensor(rng.standard_normal(shape).astype(dtype), dev))
    return args


def time_main(mod, dev, args, protocol: TimingProtocol = PROTOCOL) -> list[float]:
    """The protocol applied to ``mod["main"](*args)``: ``mod`` is a runtime module (a kernel, local or remote) or a
    Relax ``VirtualMachine`` (a whole model). Returns the ``repeat`` per-measurement means in ms."""
    protocol = protocol.as_asked()
    fn = mod["main"]
    for _ in range(max(0, protocol.warmup)):
        fn(*args)
    dev.sync()
    evaluator = mod.time_evaluator(
        "main", dev, number=protocol.number, repeat=protocol.repeat, min_repeat_ms=protocol.min_repeat_ms
    )
    res = evaluator(*args)
    return [float(s) * 1e3 for s in res.results]


def upload_remote(exe, tgt, spec: TargetSpec, timeout: float, filename: str = "kernel.so"):
    """Export ``exe`` (a compiled kernel or Relax VM executable), upload it to the board behind the tracker and load
    it there; returns ``(remote module, remote device, session)`` (keep the session while timing)."""
    from tvm import rpc

    tracker = rpc.connect_tracker(spec.host, spec.port)
    remote = tracker.request(spec.key, priority=1, session_timeout=int(timeout))
    with tempfile.TemporaryDirectory(prefix="syno_rpc_") as tmp:
        lib = os.path.join(tmp, filename)
        exe.export_library(lib)
        remote.upload(lib)
        rmod = remote.load_module(filename)
    kind = tgt.kind.name
    dev = remote.cpu(0) if kind in ("llvm", "c") else remote.device(kind, 0)
    return rmod, dev, remote


def time_remote(exe, func, tgt, spec: TargetSpec, protocol: TimingProtocol, timeout: float) -> list[float]:
    """Export the library, upload it through the tracker's session, time it remotely."""
    rmod, dev, _remote = upload_remote(exe, tgt, spec, timeout)
    return time_main(rmod, dev, random_args(func, dev), protocol)


@contextlib.contextmanager
def torch_threads(n: int | None = None) -> Iterator[int]:
    """torch's intra-op thread count set to ``n`` for the block, then restored. Default: the threads of TVM's
    runtime (``$TVM_NUM_THREADS``, else ``os.cpu_count()``, the ``num-cores`` of our llvm target)."""
    import torch

    n = int(n or os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(saved)


def _torch_inputs(example_inputs: Any, compile: bool) -> tuple[tuple[Any, ...], str, Any]:
    """(the inputs as a tuple, the target name ``inductor-<device>``/``eager-<device>``, the device's sync)."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    dev = next((t.device.type for t in example_inputs if isinstance(t, torch.Tensor)), "cpu")
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    return example_inputs, f"{'inductor' if compile else 'eager'}-{dev}", sync


def time_torch(module, example_inputs, compile: bool = True, protocol: TimingProtocol = PROTOCOL,
               threads: int | None = None, **compile_kwargs: Any) -> Latency:
    """Time ``module(*example_inputs)`` under ``torch.inference_mode`` with the protocol.

    ``compile=True``: ``torch.compile`` (TorchInductor; static shapes unless ``dynamic`` is given), compiled during
    the warm-up, which is never timed: two warm-up calls at least, the first compiles. ``threads``: torch's CPU
    threads while timing (default: TVM's, see :func:`torch_threads`). Target name ``inductor-<device>`` or
    ``eager-<device>``. Never raises."""
    import torch

    example_inputs, name, sync = _torch_inputs(example_inputs, compile)
    protocol = protocol.as_asked()
    stage = "compile" if compile else "run"
    try:
        if compile:
            compile_kwargs.setdefault("dynamic", False)  # one layer, one shape: no shape-generic kernels
        fn = torch.compile(module, **compile_kwargs) if compile else module
        with torch_threads(threads) as n_threads, torch.inference_mode():
            t0 = time.perf_counter()
            fn(*example_inputs)  # compiles (compile=True)
            sync()
            compile_s = time.perf_counter() - t0
            for _ in range(max(1, protocol.warmup)):
                fn(*example_inputs)
            sync()
            stage = "time"
            # calibrate: one call's cost -> number such that a measurement lasts min_repeat_ms
            t0 = time.perf_counter()
            fn(*example_inputs)
            sync()
            one = max(time.perf_counter() - t0, 1e-7)
            number = max(protocol.number, math.ceil(protocol.min_repeat_ms / 1e3 / one))
            samples = []
            for _ in range(protocol.repeat):
                t0 = time.perf_counter()
                for _ in range(number):
                    fn(*example_inputs)
                sync()
                samples.append((time.perf_counter() - t0) / number * 1e3)
        first = f"compile {compile_s:.1f} s (not timed)" if compile else f"first call {compile_s * 1e3:.2f} ms"
        return Latency.of_samples(samples, name, note=f"number={number}; {n_threads} threads; {first}")
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        return Latency.failed(name, f"{stage}: {type(exc).__name__}: {str(exc).strip()[:500]}")


def paired_protocol_of(timing: TimingProtocol) -> PairedProtocol:
    """The speed protocol at the size a TVM timing protocol asks (a layer, not a model): its warm-up, blocks of
    ``min_repeat_ms``, ``repeat`` pairs at least (even, two per batch) and twice that at most, one copy.

    Example:
        >>> paired_protocol_of(PROTOCOL).min_pairs, paired_protocol_of(PROTOCOL).min_block_s
        (16, 0.05)
    """
    pairs = max(4, 2 * math.ceil(timing.repeat / 2))
    return PairedProtocol(warmup=max(1, timing.warmup), min_block_s=max(1, timing.min_repeat_ms) / 1e3,
                          min_pairs=pairs, max_pairs=2 * pairs, target_halfwidth=SPEED_PROTOCOL.target_halfwidth,
                          copies=1)


def time_torch_pair(module, baseline, example_inputs, compile: bool = False,
                    protocol: PairedProtocol = SPEED_PROTOCOL, threads: int | None = None,
                    ) -> tuple[Latency, Latency, SpeedupEstimate | None]:
    """``module`` against ``baseline`` (both called on ``example_inputs`` under ``torch.inference_mode``) by the
    speed protocol: interleaved blocks, the ratio with its interval. Returns the two sides' latencies (each the
    median per-call time of its blocks) and the estimate. ``compile=True``: both ``torch.compile``d (static
    shapes), compiled in the protocol's warm-up, never timed. Never raises: a failure is both latencies' note."""
    import torch

    example_inputs, name, sync = _torch_inputs(example_inputs, compile)

    def caller(m: Any) -> Any:
        fn = torch.compile(m, dynamic=False) if compile else m

        def call() -> Any:
            with torch.inference_mode():
                return fn(*example_inputs)
        return call
    try:
        with timing_in_progress(), torch_threads(threads) as n_threads:
            estimate = paired_speedup(caller(baseline), caller(module), protocol, sync=sync)
    except Exception as exc:  # noqa: BLE001 -- never raises: the reason is the note
        failed = Latency.failed(name, f"paired timing: {type(exc).__name__}: {str(exc).strip()[:500]}")
        return failed, failed, None
    if estimate is None:
        failed = Latency.failed(name, "paired timing: no estimate")
        return failed, failed, None
    note = f"speed protocol, {estimate.pairs} pairs, {n_threads} threads; speedup {estimate.text()}"
    return (Latency(estimate.candidate_ms, None, estimate.pairs, name, 0, note),
            Latency(estimate.baseline_ms, None, estimate.pairs, name, 0, note), estimate)
