"""Tuned latency of operators and of the layers they replace (TVM MetaSchedule + one timing protocol).

Timing protocol (the ONE protocol every number of this project uses; :data:`PROTOCOL`)
--------------------------------------------------------------------------------------
1. build the kernel (tuned schedule from the on-disk database, or TVM's default schedule when
   ``trials == 0``) and allocate random fp32 inputs once;
2. warm-up: ``warmup`` plain calls (first-touch of memory, thread-pool spin-up, lazy loading);
3. ``time_evaluator(number, repeat, min_repeat_ms)``: ``repeat`` measurements, each the mean of
   ``number`` back-to-back calls, where TVM raises ``number`` until one measurement lasts at least
   ``min_repeat_ms`` (so tiny kernels are not timer-bound);
4. report ``median_ms`` = median of the ``repeat`` measurements and ``spread_ms`` = their inter-quartile
   range (q75 - q25); ``samples_ms`` keeps them all.

:func:`time_torch` applies the same protocol to a torch module (eager or ``torch.compile``/Inductor),
calibrating ``number`` with ``time.perf_counter`` the same way.

Tuning: MetaSchedule (``tvm.s_tir.meta_schedule``), with

* an in-process builder (MetaSchedule's LocalBuilder spawns a fresh process pool per batch and every
  worker re-imports ``tvm.s_tir.tensor_intrin``: 30-60 s each on this machine);
* a JSON database under ``work_dir`` (``database_workload.json``, ``database_tuning_record.json``), shared by
  all workloads: when it already holds ``>= trials`` records for the same workload and target, nothing is
  re-tuned (``Latency.reused``), otherwise only the missing trials are run;
* an optional time budget ``seconds`` (checked after every measured batch; the best schedule found so far
  is used). With ``isolate=True`` the whole call runs in a child process, killed after ``seconds`` plus a
  grace period; it also shields the caller from crashes inside TVM.

Targets: ``"llvm"`` (host CPU, mcpu from LLVM, num-cores = os.cpu_count()), ``"cuda"`` (when a GPU is
present), ``"rpc:KEY@host:port"`` (a board behind a TVM RPC tracker: the kernel is built here for
``build_target`` -- the host llvm target unless given -- uploaded and timed remotely).

Nothing here raises on a tuning/build/timing failure: the returned :class:`Latency` has
``median_ms=None`` and the reason in ``note``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Latency",
    "TimingProtocol",
    "PROTOCOL",
    "parse_target",
    "tune_and_time",
    "conv2d_nchw_te",
    "dense_te",
    "compare",
    "speedup",
    "time_torch",
    "DEFAULT_WORK_DIR",
]

_log = logging.getLogger(__name__)

DEFAULT_WORK_DIR = os.environ.get("SYNO_TVM_WORK_DIR", os.path.join(os.getcwd(), ".tvm_tuning"))


@dataclass(frozen=True)
class TimingProtocol:
    """See the module docstring. ``number`` is a floor: ``min_repeat_ms`` may raise it."""

    warmup: int = 1
    number: int = 10
    repeat: int = 15
    min_repeat_ms: int = 50


PROTOCOL = TimingProtocol()


@dataclass
class Latency:
    median_ms: float | None
    spread_ms: float | None  # inter-quartile range of the per-repeat means
    repeats: int
    target: str
    tuned_trials: int
    note: str = ""
    samples_ms: list[float] = field(default_factory=list)
    reused: bool = False  # the tuning records came from the on-disk database, no new trial was run
    tuning_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.median_ms is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Latency:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def failed(cls, target: str, note: str, tuned_trials: int = 0, tuning_s: float | None = None) -> Latency:
        return cls(None, None, 0, target, tuned_trials, note, tuning_s=tuning_s)


def _summarize(samples_ms: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(samples_ms, dtype=np.float64)
    q25, q50, q75 = np.percentile(arr, [25, 50, 75])
    return float(q50), float(q75 - q25)


def speedup(baseline: Latency, operator: Latency) -> float | None:
    """``baseline / operator`` (> 1: the operator is faster), None when either is missing."""
    if not (baseline.ok and operator.ok) or operator.median_ms <= 0:
        return None
    return baseline.median_ms / operator.median_ms


# --------------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------------


@dataclass
class _TargetSpec:
    name: str  # the spec as given ("llvm", "cuda", "rpc:KEY@host:port", ...)
    kind: str  # "local" or "rpc"
    key: str | None = None
    host: str | None = None
    port: int | None = None


def parse_target(spec: Any) -> _TargetSpec:
    """``"llvm"`` | ``"cuda"`` | ``"rpc:KEY@host:port"`` | a tvm Target / JSON dict (local)."""
    if isinstance(spec, str) and spec.startswith("rpc:"):
        body = spec[4:]
        key, sep, addr = body.rpartition("@")
        host, sep2, port = addr.rpartition(":")
        if not (sep and sep2 and key and host and port.isdigit()):
            raise ValueError(f"bad RPC target {spec!r}: expected rpc:KEY@host:port")
        return _TargetSpec(spec, "rpc", key, host, int(port))
    if isinstance(spec, Mapping):
        return _TargetSpec(json.dumps(dict(spec), sort_keys=True), "local")
    return _TargetSpec(str(spec), "local")


def _ensure_tensor_intrin(kind: str) -> None:
    """Register only the tensor intrinsics the target can use.

    ``import tvm.s_tir.tensor_intrin`` (done by ``TuneContext`` and MetaSchedule's default builder)
    registers the intrinsics of every backend; on this machine it takes about a minute, almost all of it
    the CUDA ones.  Unless ``SYNO_TVM_FULL_INTRIN=1``, the package is registered empty and only the
    submodules for ``kind`` are imported (x86/arm for llvm, cuda for cuda); later imports of the package
    then find it in ``sys.modules``.  Submodules stay importable by name."""
    import tvm  # noqa: F401
    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin"
    if os.environ.get("SYNO_TVM_FULL_INTRIN") == "1":
        importlib.import_module(name)
        return
    if name not in sys.modules:
        spec = importlib.util.find_spec(name)
        module = importlib.util.module_from_spec(spec)  # a package object; its __init__ is NOT run
        sys.modules[name] = module
        tvm.s_tir.tensor_intrin = module
    mod = sys.modules[name]
    if not hasattr(mod, "__path__"):  # a full import happened earlier: everything is registered
        return
    if kind in ("llvm", "c"):
        import platform

        subs = ["arm_cpu"] if platform.machine().lower() in ("aarch64", "arm64") else ["x86"]
    elif kind == "cuda":
        subs = ["cuda"]
    else:
        subs = []
    for sub in subs:
        importlib.import_module(f"{name}.{sub}")


# --------------------------------------------------------------------------------------------------
# MetaSchedule pieces
# --------------------------------------------------------------------------------------------------

_MS_CLASSES: dict[str, Any] = {}


def _ms_classes():
    """The in-process builder and the deadline callback (defined lazily: they need tvm)."""
    if _MS_CLASSES:
        return _MS_CLASSES
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class InProcessBuilder(PyBuilder):
        """Compiles every candidate in this process (0.03-0.3 s each) and exports it as a tar for the runner."""

        def build(self, build_inputs):
            from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
            from tvm.support.tar import tar

            results = []
            for bi in build_inputs:
                try:
                    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(bi.mod)
                    rt_mod = tvm.compile(mod, target=bi.target).mod
                    path = os.path.join(tempfile.mkdtemp(prefix="syno_ms_"), "kernel." + tar.output_format)
                    rt_mod.export_library(path, fcompile=tar)
                    results.append(BuilderResult(path, None))
                except Exception as exc:  # one bad candidate must not stop the search
                    results.append(BuilderResult(None, f"InProcessBuilder: {type(exc).__name__}: {exc}"))
            return results

    @derived_object
    class TuningMonitor(PyMeasureCallback):
        """Keeps the first build/run errors (for the note) and terminates the task once the wall-clock
        deadline has passed (checked after each measured batch)."""

        def __init__(self, deadline: float):
            super().__init__()
            self.deadline = deadline
            self.hit = False
            self.errors: list[str] = []

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            for br, rr in zip(builder_results, runner_results):
                msg = br.error_msg or (rr.error_msg if rr is not None else None)
                if msg and len(self.errors) < 3:
                    self.errors.append(" ".join(str(msg).split())[:300])
            if time.time() >= self.deadline:
                self.hit = True
                task_scheduler.terminate_task(task_id)

    _MS_CLASSES.update(InProcessBuilder=InProcessBuilder, TuningMonitor=TuningMonitor)
    return _MS_CLASSES


def _search_strategy(trials: int):
    """Evolutionary search sized to the budget: the default (population 512, 4 genetic rounds) spends a
    minute or more in the cost model before the first measurement, which dwarfs a handful of trials."""
    from tvm.s_tir import meta_schedule as ms

    if trials >= 256:
        return "evolutionary"
    pop = int(min(512, max(32, 8 * trials)))
    return ms.search_strategy.EvolutionarySearch(
        population_size=pop,
        init_min_unmeasured=min(50, pop),
        genetic_num_iters=1 if trials < 64 else 3,
    )


def _target_str(t) -> str:
    return str(t)


def _records_for(db, mod, target) -> list:
    """Valid tuning records of this workload on this target (best first)."""
    if not db.has_workload(mod):
        return []
    wl = db.commit_workload(mod)
    recs = db.get_top_k(wl, 1 << 30)
    want = _target_str(target)
    return [r for r in recs if r.target is None or _target_str(r.target) == want]


@contextlib.contextmanager
def _ms_logging():
    """MetaSchedule (re)configures its loggers with ``logging.config.dictConfig`` on every tuning call,
    listing the handlers already on ``tvm.s_tir.meta_schedule`` by name: an unnamed one (e.g. pytest's
    LogCaptureHandler, which dictConfig ends up attaching there) makes it fail with
    ``'NoneType' object has no attribute 'format'``.  Detach unnamed handlers for the call; keep the
    console quiet (WARNING; the per-work_dir log files still get DEBUG)."""
    lg = logging.getLogger("tvm.s_tir.meta_schedule")
    unnamed = [h for h in lg.handlers if not h.get_name()]
    for h in unnamed:
        lg.removeHandler(h)
    lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for h in unnamed:
            if h not in lg.handlers:
                lg.addHandler(h)


def _tune(mod, tgt, trials: int, work_dir: str, seconds: float | None, runner, seed: int) -> dict[str, Any]:
    """Tune ``mod`` into the JSON database; returns the best schedule's module and bookkeeping."""
    from tvm.s_tir import meta_schedule as ms

    _ensure_tensor_intrin(tgt.kind.name)
    os.makedirs(work_dir, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
    have = len(_records_for(db, mod, tgt))
    info: dict[str, Any] = {"reused": have >= trials, "new_trials": 0, "deadline_hit": False, "errors": []}
    t0 = time.time()
    if have < trials:
        classes = _ms_classes()
        monitor = classes["TuningMonitor"](t0 + seconds if seconds else float("inf"))
        callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [monitor]
        per_iter = int(min(64, max(1, trials - have)))
        if seconds:  # with a time budget, check it at least about 4 times
            per_iter = min(per_iter, max(4, trials // 4))
        with _ms_logging():
            ms.tune_tir(
                mod=mod,
                target=tgt,
                work_dir=work_dir,
                max_trials_global=trials - have,
                num_trials_per_iter=per_iter,
                builder=classes["InProcessBuilder"](),
                runner=runner,
                database=db,
                cost_model="xgb",
                measure_callbacks=callbacks,
                strategy=_search_strategy(trials),
                num_tuning_cores=os.cpu_count() or 1,
                seed=seed,
            )
        info["deadline_hit"] = bool(monitor.hit)
        info["errors"] = list(monitor.errors)
        db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")  # re-read from disk
    recs = _records_for(db, mod, tgt)
    info["new_trials"] = max(0, len(recs) - have)
    info["records"] = len(recs)
    info["tuning_s"] = time.time() - t0
    info["mod"] = _apply_record(mod, recs[0]) if recs else None
    return info


def _apply_record(mod, record):
    """The best record's schedule, prepared like the builder prepares candidates.

    (``Database.query_schedule`` takes the top record of the workload whatever its target, so the record
    is picked here, among those of the right target.)  ``RemoveWeightLayoutRewriteBlock`` drops weight
    layout rewrites from the timed kernel, as during tuning: weights are treated as constants laid out
    ahead of time, for the operator and the baseline alike."""
    from tvm.s_tir.schedule import Schedule
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    sch = Schedule(mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)


# --------------------------------------------------------------------------------------------------
# tune and time
# --------------------------------------------------------------------------------------------------


def _random_args(func, dev, seed: int = 0):
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


def _time_module(rt_mod, dev, args, protocol: TimingProtocol) -> list[float]:
    fn = rt_mod["main"]
    for _ in range(max(0, protocol.warmup)):
        fn(*args)
    dev.sync()
    evaluator = rt_mod.time_evaluator(
        "main", dev, number=protocol.number, repeat=protocol.repeat, min_repeat_ms=protocol.min_repeat_ms
    )
    res = evaluator(*args)
    return [float(s) * 1e3 for s in res.results]


def _to_irmodule(obj):
    import tvm
    from tvm import te

    from syno_automl.codegen.tvm import program_to_irmodule

    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], te.Tensor):
        ins, out = obj
        func = te.create_prim_func([*ins, out]).with_attr("global_symbol", "main")
        return tvm.IRModule({"main": func})
    return program_to_irmodule(obj)


def tune_and_time(
    program_or_primfunc,
    target: Any = "llvm",
    trials: int = 0,
    work_dir: str | None = None,
    seconds: float | None = None,
    *,
    protocol: TimingProtocol = PROTOCOL,
    build_target: Any = None,
    seed: int = 0,
    isolate: bool = False,
    isolate_grace_s: float = 120.0,
    rpc_session_timeout: float = 120.0,
) -> Latency:
    """Tune (``trials > 0``) and time a program dict / PrimFunc / IRModule / ``(inputs, out)`` TE pair.

    ``trials=0``: TVM's default schedule (DLight defaults on CUDA), no database.
    ``seconds``: tuning time budget (soft, checked after each batch; hard when ``isolate=True``).
    ``build_target``: what to compile for when ``target`` is ``rpc:...`` (default: the host llvm target).
    ``isolate``: run in a child process, killed after ``seconds + isolate_grace_s`` (no limit without ``seconds``).
    Never raises: a failure gives ``median_ms=None`` with the reason in ``note``."""
    name = target if isinstance(target, str) else str(target)
    try:
        spec = parse_target(target)
        name = spec.name
    except Exception as exc:
        return Latency.failed(str(target), f"target: {exc}")
    if isolate:
        return _run_isolated(
            program_or_primfunc, target, trials, work_dir, seconds, protocol, build_target, seed, isolate_grace_s
        )
    stage = "lower"
    tuned_trials, tuning_s, reused, notes = 0, None, False, []
    try:
        import tvm

        from syno_automl.codegen.tvm import default_gpu_schedule, device_for, make_target

        mod = _to_irmodule(program_or_primfunc)
        stage = "target"
        if spec.kind == "rpc":
            tgt = make_target(build_target if build_target is not None else "llvm")
        else:
            tgt = make_target(target)
            if tgt.kind.name == "cuda" and not tvm.cuda(0).exist:
                return Latency.failed(name, "target: no CUDA device present")
        sched_mod = mod
        if trials > 0:
            stage = "tune"
            from tvm.s_tir import meta_schedule as ms

            evaluator = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20)
            if spec.kind == "rpc":
                runner = ms.runner.RPCRunner(
                    rpc_config=ms.runner.RPCConfig(
                        tracker_host=spec.host,
                        tracker_port=spec.port,
                        tracker_key=spec.key,
                        session_timeout_sec=int(rpc_session_timeout),
                    ),
                    evaluator_config=evaluator,
                )
            else:
                runner = ms.runner.LocalRunner(timeout_sec=60, evaluator_config=evaluator)
            wd = work_dir or DEFAULT_WORK_DIR
            if spec.kind == "rpc":  # records measured on a board stay apart from the host's (same Target)
                wd = os.path.join(wd, "rpc-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.key))
            try:
                info = _tune(mod, tgt, int(trials), wd, seconds, runner, seed)
            finally:
                _close_runner(runner)
            tuned_trials, tuning_s, reused = info["records"], info["tuning_s"], info["reused"]
            if info["mod"] is None:
                why = "tuning time budget ran out" if info["deadline_hit"] else "no valid trial"
                errs = f"; first errors: {' || '.join(info['errors'])}" if info["errors"] else ""
                return Latency.failed(name, f"tune: {why} ({trials} trials asked){errs}", 0, tuning_s)
            sched_mod = info["mod"]
            notes.append(
                f"reused {tuned_trials} records from {wd}"
                if reused
                else f"tuned {info['new_trials']} new trials in {tuning_s:.1f} s ({tuned_trials} records)"
            )
            if info["deadline_hit"]:
                notes.append(f"stopped at the {seconds} s budget")
        else:
            notes.append("untuned default schedule")
        stage = "build"
        if trials <= 0 and tgt.kind.name == "cuda":
            sched_mod = default_gpu_schedule(sched_mod, tgt)
        exe = tvm.compile(sched_mod, target=tgt)
        func = mod["main"]
        stage = "time"
        if spec.kind == "rpc":
            samples = _time_remote(exe, func, tgt, spec, protocol, rpc_session_timeout)
        else:
            dev = device_for(tgt)
            samples = _time_module(exe.mod, dev, _random_args(func, dev, seed), protocol)
        med, iqr = _summarize(samples)
        return Latency(med, iqr, len(samples), name, tuned_trials, "; ".join(notes), samples, reused, tuning_s)
    except Exception as exc:
        if os.environ.get("SYNO_LATENCY_RAISE") == "1":  # debugging aid
            raise
        _log.debug("tune_and_time failed at %s", stage, exc_info=True)
        text = str(exc).strip()
        msg = f"{stage}: {type(exc).__name__}: {text.splitlines()[-1] if text else ''}"
        return Latency.failed(name, msg, tuned_trials, tuning_s)


def _close_runner(runner) -> None:
    """Kill the runner's worker processes now (they would otherwise live until garbage collection)."""
    try:
        pool = getattr(runner, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
    except Exception:  # best effort
        pass


def _time_remote(exe, func, tgt, spec: _TargetSpec, protocol: TimingProtocol, timeout: float) -> list[float]:
    """Export the library, upload it through the tracker's session, time it remotely."""
    import tvm
    from tvm import rpc

    tracker = rpc.connect_tracker(spec.host, spec.port)
    remote = tracker.request(spec.key, priority=1, session_timeout=int(timeout))
    with tempfile.TemporaryDirectory(prefix="syno_rpc_") as tmp:
        lib = os.path.join(tmp, "kernel.so")
        exe.export_library(lib)
        remote.upload(lib)
        rmod = remote.load_module("kernel.so")
    kind = tgt.kind.name
    dev = remote.cpu(0) if kind in ("llvm", "c") else remote.device(kind, 0)
    args = _random_args(func, dev)
    return _time_module(rmod, dev, args, protocol)


# --------------------------------------------------------------------------------------------------
# isolation in a child process (hard timeout, crash shield)
# --------------------------------------------------------------------------------------------------


def _run_isolated(obj, target, trials, work_dir, seconds, protocol, build_target, seed, grace) -> Latency:
    name = target if isinstance(target, str) else str(target)
    try:
        import tvm

        mod = _to_irmodule(obj)
        tgt_payload = target if isinstance(target, (str, dict)) else str(target)
        bt_payload = build_target if build_target is None or isinstance(build_target, (str, dict)) else str(build_target)
        job = {
            "mod": tvm.ir.save_json(mod),
            "target": tgt_payload,
            "trials": int(trials),
            "work_dir": work_dir,
            "seconds": seconds,
            "protocol": dataclasses.asdict(protocol),
            "build_target": bt_payload,
            "seed": seed,
        }
    except Exception as exc:
        return Latency.failed(name, f"lower: {type(exc).__name__}: {exc}")
    limit = (seconds + grace) if seconds is not None else None
    with tempfile.TemporaryDirectory(prefix="syno_lat_") as tmp:
        job_path, out_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        proc = subprocess.Popen(
            [sys.executable, "-m", "syno_automl.latency", job_path, out_path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return Latency.failed(name, f"timeout: child killed after {limit:g} s (budget {seconds} s + {grace} s grace)")
        if proc.returncode != 0 or not os.path.exists(out_path):
            tail = (err or b"").decode(errors="replace").strip().splitlines()[-3:]
            return Latency.failed(name, f"child exited with {proc.returncode}: {' | '.join(tail)}")
        with open(out_path) as f:
            return Latency.from_dict(json.load(f))


def _child_main(job_path: str, out_path: str) -> None:
    import tvm

    with open(job_path) as f:
        job = json.load(f)
    mod = tvm.ir.load_json(job["mod"])
    lat = tune_and_time(
        mod,
        job["target"],
        job["trials"],
        job["work_dir"],
        job["seconds"],
        protocol=TimingProtocol(**job["protocol"]),
        build_target=job["build_target"],
        seed=job["seed"],
    )
    with open(out_path, "w") as f:
        json.dump(lat.to_dict(), f)


# --------------------------------------------------------------------------------------------------
# baselines: the layers an operator replaces
# --------------------------------------------------------------------------------------------------


def conv2d_nchw_te(N, C_in, C_out, H, W, k, stride=1, groups=1, dtype="float32"):
    """PrimFunc ``main(x[N,C_in,H,W], w[C_out,C_in/groups,k,k], out)``: conv2d NCHW, zero padding k//2
    ("same" for stride 1, like the UNFOLD primitive), no bias."""
    import tvm
    from tvm import te, tirx

    if C_in % groups or C_out % groups:
        raise ValueError(f"groups={groups} must divide C_in={C_in} and C_out={C_out}")
    cig, cog = C_in // groups, C_out // groups
    pad = k // 2
    Ho, Wo = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    x = te.placeholder((N, C_in, H, W), dtype, name="x")
    w = te.placeholder((C_out, cig, k, k), dtype, name="w")
    xp = te.compute(
        (N, C_in, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, v: tirx.if_then_else(
            tirx.all(h >= pad, h < H + pad, v >= pad, v < W + pad), x[n, c, h - pad, v - pad], tirx.const(0, dtype)
        ),
        name="pad",
    )
    rc = te.reduce_axis((0, cig), name="rc")
    ry = te.reduce_axis((0, k), name="ry")
    rx = te.reduce_axis((0, k), name="rx")
    out = te.compute(
        (N, C_out, Ho, Wo),
        lambda n, o, i, j: te.sum(
            xp[n, tirx.floordiv(o, cog) * cig + rc, i * stride + ry, j * stride + rx] * w[o, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv2d",
    )
    return te.create_prim_func([x, w, out]).with_attr("global_symbol", "main")


def dense_te(N, C_in, C_out, dtype="float32"):
    """PrimFunc ``main(x[N,C_in], w[C_out,C_in], out[N,C_out])``: ``out = x @ w.T`` (torch Linear, no bias)."""
    from tvm import te

    x = te.placeholder((N, C_in), dtype, name="x")
    w = te.placeholder((C_out, C_in), dtype, name="w")
    r = te.reduce_axis((0, C_in), name="r")
    out = te.compute((N, C_out), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="dense")
    return te.create_prim_func([x, w, out]).with_attr("global_symbol", "main")


def compare(operator, baseline, target: Any = "llvm", trials: int = 0, work_dir: str | None = None,
            seconds: float | None = None, **kwargs) -> dict[str, Any]:
    """Tune and time an operator and its baseline with the same budget and protocol.
    Returns ``{"operator": Latency, "baseline": Latency, "speedup": baseline/operator or None}``."""
    op = tune_and_time(operator, target, trials, work_dir, seconds, **kwargs)
    base = tune_and_time(baseline, target, trials, work_dir, seconds, **kwargs)
    return {"operator": op, "baseline": base, "speedup": speedup(base, op)}


# --------------------------------------------------------------------------------------------------
# PyTorch: eager and torch.compile (TorchInductor), same protocol
# --------------------------------------------------------------------------------------------------


def time_torch(module, example_inputs, compile: bool = True, protocol: TimingProtocol = PROTOCOL,
               **compile_kwargs) -> Latency:
    """Time ``module(*example_inputs)`` under ``torch.inference_mode`` with :data:`PROTOCOL`:
    warm-up (for ``compile=True`` this is where Inductor compiles; one extra call is made), then
    ``repeat`` measurements of ``number`` calls each, ``number`` raised until a measurement lasts
    ``min_repeat_ms``. Target name: ``inductor-<device>`` or ``eager-<device>``. Never raises."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    dev = next((t.device.type for t in example_inputs if isinstance(t, torch.Tensor)), "cpu")
    name = f"{'inductor' if compile else 'eager'}-{dev}"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    stage = "compile" if compile else "run"
    try:
        fn = torch.compile(module, **compile_kwargs) if compile else module
        with torch.inference_mode():
            t0 = time.perf_counter()
            for _ in range(max(1, protocol.warmup) + (1 if compile else 0)):
                fn(*example_inputs)
            sync()
            compile_s = time.perf_counter() - t0
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
        med, iqr = _summarize(samples)
        note = f"number={number}; warm-up {compile_s:.1f} s" + (" (includes compile)" if compile else "")
        return Latency(med, iqr, len(samples), name, 0, note, samples)
    except Exception as exc:
        return Latency.failed(name, f"{stage}: {type(exc).__name__}: {str(exc).strip()[:500]}")


if __name__ == "__main__":  # child of tune_and_time(isolate=True)
    try:
        _child_main(sys.argv[1], sys.argv[2])
    except Exception:
        traceback.print_exc()
        sys.exit(3)
