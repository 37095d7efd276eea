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
* a runner chosen by :func:`make_runner`: MetaSchedule's ``LocalRunner`` (default: a worker process, a
  crashing candidate only fails its trial), an in-process runner (``runner="inprocess"``: no worker start,
  export or linking per candidate; not crash-proof), or ``RPCRunner`` for ``rpc:`` targets. Every candidate
  is measured with :data:`MS_EVALUATOR`; a search that runs out of new candidates (a small design space)
  stops at once instead of retrying;
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

:func:`measure_operator` is the high-level entry: an operator and the layer it replaces (inferred from the
shapes: conv2d NCHW or dense), every target, the metrics named as MLflow logs them (``latency_ms.<device>``,
``speedup.<device>``, ``latency_ms.inductor-<device>``, ``speedup.inductor-<device>``) plus the reasons for
missing values. :func:`measure_layers` sums it over every layer an operator replaces (every mapping of its
space), with a JSON-able tuning summary per device (``syno-automl tune`` prints, stores and logs it). Whole
models (the paper's Fig. 5) are in :mod:`syno_automl.e2e`, through the same tuning loop (:func:`run_tuning`) and
timing function (:func:`time_main`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import itertools
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
    "device_name",
    "infer_baseline",
    "measure_operator",
    "measure_layers",
    "layer_line",
    "total_line",
    "schedules_label",
    "UNTUNED",
    "run_tuning",
    "time_main",
    "resolve_target",
    "DEFAULT_WORK_DIR",
]

_log = logging.getLogger(__name__)

def resolve_target(spec: Any, target: Any, build_target: Any = None) -> tuple[Any, str | None]:
    """(the TVM target to build for, None), or (None, why it cannot be used now): an unreachable RPC tracker, or
    CUDA asked for where no CUDA device is present."""
    import tvm

    from syno_automl.codegen.tvm import make_target

    if spec.kind == "rpc":
        why = tracker_unreachable(spec)
        if why:
            return None, f"target: {why}"
        return make_target(build_target if build_target is not None else "llvm"), None
    tgt = make_target(target)
    if tgt.kind.name == "cuda" and not tvm.cuda(0).exist:
        return None, "target: no CUDA device present"
    return tgt, None


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


def tracker_unreachable(spec: _TargetSpec, timeout: float = 10.0) -> str:
    """'' when the RPC tracker of ``spec`` accepts a TCP connection, else why not (TVM's own client retries
    for a minute before giving up)."""
    import socket

    try:
        with socket.create_connection((spec.host, spec.port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"RPC tracker {spec.host}:{spec.port} unreachable ({exc})"


def device_name(target: Any) -> str:
    """The ``<device>`` of the metric names: ``"llvm"``, ``"cuda"``, ``"rpc-KEY"`` for ``rpc:KEY@host:port``;
    a Target / JSON dict gives its kind."""
    spec = parse_target(target)
    if spec.kind == "rpc":
        return f"rpc-{spec.key}"
    if isinstance(target, str) and not target.strip().startswith("{"):
        # MLflow metric names take letters, digits, _ - . / and spaces: "llvm -mcpu=x" -> "llvm_-mcpu_x"
        return "_".join(slug(part) for part in target.split())
    try:
        from syno_automl.codegen.tvm import make_target

        return str(make_target(target).kind.name)
    except Exception:
        return spec.name


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
_INPROC_ARTIFACTS: dict[str, Any] = {}  # InProcessBuilder(in_memory=True) -> InProcessRunner
_INPROC_IDS = itertools.count()


def _ms_classes():
    """The in-process builder and the deadline callback (defined lazily: they need tvm)."""
    if _MS_CLASSES:
        return _MS_CLASSES
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    from tvm.s_tir.meta_schedule.runner import PyRunner
    from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture, default_alloc_argument
    from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

    @derived_object
    class InProcessBuilder(PyBuilder):
        """Compiles every candidate in this process (0.03-0.3 s each). ``in_memory=False``: exports it as a tar
        for a runner in another process (LocalRunner, RPCRunner); ``in_memory=True``: keeps the runtime
        module in this process under a key (a path in an empty temporary folder), for
        :class:`InProcessRunner` (no export, no linking)."""

        def __init__(self, in_memory: bool = False):
            super().__init__()
            self.in_memory = in_memory

        def build(self, build_inputs):
            from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
            from tvm.support.tar import tar

            results = []
            for bi in build_inputs:
                try:
                    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(bi.mod)
                    rt_mod = tvm.compile(mod, target=bi.target).mod
                    if self.in_memory:
                        # a real (empty) folder: the task scheduler removes dirname(artifact) after the run
                        key = os.path.join(tempfile.mkdtemp(prefix="syno_ms_"), f"inproc-{next(_INPROC_IDS)}")
                        _INPROC_ARTIFACTS[key] = rt_mod
                        results.append(BuilderResult(key, None))
                        continue
                    path = os.path.join(tempfile.mkdtemp(prefix="syno_ms_"), "kernel." + tar.output_format)
                    rt_mod.export_library(path, fcompile=tar)
                    results.append(BuilderResult(path, None))
                except Exception as exc:  # one bad candidate must not stop the search
                    results.append(BuilderResult(None, f"InProcessBuilder: {type(exc).__name__}: {exc}"))
            return results

    @derived_object
    class InProcessRunner(PyRunner):
        """Times the candidates of :class:`InProcessBuilder` (``in_memory=True``) in this process, as
        MetaSchedule's LocalRunner does in its worker (random inputs, ``time_evaluator`` with the evaluator
        config), without a worker process, export or linking: about 1-2 s less per candidate here. A
        candidate that crashes takes the process down: run under ``isolate=True`` to be shielded."""

        def __init__(self, evaluator_config=None, alloc_repeat: int = 1):
            super().__init__()
            from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

            self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
            self.alloc_repeat = alloc_repeat

        def run(self, runner_inputs):
            futures = []
            for ri in runner_inputs:
                rt_mod = _INPROC_ARTIFACTS.pop(str(ri.artifact_path), None)
                try:
                    if rt_mod is None:
                        raise RuntimeError(f"no in-process artifact {ri.artifact_path!r}")
                    dev = tvm.runtime.device(str(ri.device_type), 0)
                    args = default_alloc_argument(dev, tuple(a.as_json() for a in ri.args_info), self.alloc_repeat)
                    costs = run_evaluator_common(rt_mod, dev, self.evaluator_config, args)
                    futures.append(LocalRunnerFuture(res=costs, error_message=None))
                except Exception as exc:
                    futures.append(LocalRunnerFuture(res=None, error_message=f"InProcessRunner: {type(exc).__name__}: "
                                                                             f"{exc}"))
            return futures

    @derived_object
    class TuningMonitor(PyMeasureCallback):
        """Keeps the first build/run errors (for the note) and terminates the task once the wall-clock
        deadline has passed (checked after each measured batch).

        A task whose search comes back with no new candidate (its design space is exhausted: small injective
        kernels after a trial or two) is terminated at once: MetaSchedule would otherwise keep asking, a few
        seconds each time, until its retry limit."""

        def __init__(self, deadline: float):
            super().__init__()
            self.deadline = deadline
            self.hit = False
            self.exhausted = 0
            self.errors: list[str] = []

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            if len(measure_candidates) == 0 and not task_scheduler.tasks_[task_id].is_terminated:
                self.exhausted += 1
                task_scheduler.terminate_task(task_id)
            for br, rr in zip(builder_results, runner_results):
                msg = br.error_msg or (rr.error_msg if rr is not None else None)
                if msg and len(self.errors) < 3:
                    self.errors.append(" ".join(str(msg).split())[:300])
            if time.time() >= self.deadline:
                self.hit = True
                # every task still open (a Relax model has several), the current one included
                for i, rec in enumerate(task_scheduler.tasks_):
                    if not rec.is_terminated:
                        task_scheduler.terminate_task(i)

    _MS_CLASSES.update(InProcessBuilder=InProcessBuilder, InProcessRunner=InProcessRunner, TuningMonitor=TuningMonitor)
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


def slug(name: str) -> str:
    """``name`` as a file-name part (work-dir folders, artifact names)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


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


MS_EVALUATOR = {"number": 3, "repeat": 1, "min_repeat_ms": 20}  # how MetaSchedule measures each candidate


def make_runner(spec: _TargetSpec, kind: str | None = None, rpc_session_timeout: float = 120.0):
    """The MetaSchedule runner for a target: ``(runner, in_memory)``.

    RPC targets: ``RPCRunner`` through the tracker. Local targets: ``kind`` (default: ``$SYNO_MS_RUNNER``,
    else ``"local"``) is ``"local"`` (MetaSchedule's ``LocalRunner``: a worker process loads each exported
    candidate, so a candidate that crashes only fails its trial) or ``"inprocess"`` (:class:`InProcessRunner`,
    paired with an in-memory :class:`InProcessBuilder`: no worker, export or linking, 1-2 s less per
    candidate, which matters for models made of many small kernels; but a crashing candidate, e.g. one
    calling a missing extern symbol, takes the process down: use it under ``isolate=True``)."""
    from tvm.s_tir import meta_schedule as ms

    evaluator = ms.runner.EvaluatorConfig(**MS_EVALUATOR)
    if spec.kind == "rpc":
        return ms.runner.RPCRunner(
            rpc_config=ms.runner.RPCConfig(tracker_host=spec.host, tracker_port=spec.port, tracker_key=spec.key,
                                           session_timeout_sec=int(rpc_session_timeout)),
            evaluator_config=evaluator,
        ), False
    kind = kind or os.environ.get("SYNO_MS_RUNNER") or "local"
    if kind == "inprocess":
        return _ms_classes()["InProcessRunner"](evaluator), True
    if kind == "local":
        return ms.runner.LocalRunner(timeout_sec=60, evaluator_config=evaluator), False
    raise ValueError(f"unknown runner {kind!r}: 'inprocess' or 'local'")


def _cost_model() -> str:
    """XGBoost guides the search where it is installed (the ``tvm`` extra brings xgboost-cpu); without it
    MetaSchedule still tunes, with a random cost model, rather than failing."""
    return "xgb" if importlib.util.find_spec("xgboost") is not None else "random"


def run_tuning(contexts, weights, work_dir: str, db, trials: int, missing: Sequence[int], seconds: float | None,
               runner, in_memory: bool = False) -> dict[str, Any]:
    """THE MetaSchedule tuning loop of this project (one kernel: :func:`tune_and_time`; every fused kernel of a
    Relax model: :mod:`syno_automl.e2e`).

    ``contexts``/``weights``: the tasks (``TuneContext``, made with :func:`_search_strategy` ``(trials)``) and
    their weights; ``missing``: how many trials each task still needs (``trials`` minus the records it already
    holds); records go to ``db``. Candidates are compiled by :class:`InProcessBuilder` (``in_memory`` for
    :class:`InProcessRunner`) and measured by ``runner`` (see :func:`make_runner`); the cost model is
    :func:`_cost_model`. A :class:`TuningMonitor` stops a task whose design space is exhausted and, past the
    ``seconds`` deadline, every task (checked after each measured batch). Returns
    ``{"deadline_hit": bool, "errors": [the first build/run errors]}``."""
    from tvm.s_tir import meta_schedule as ms

    classes = _ms_classes()
    monitor = classes["TuningMonitor"](time.time() + seconds if seconds else float("inf"))
    callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [monitor]
    per_iter = int(min(64, max(1, max(missing))))
    if seconds:  # with a time budget, check it at least about 4 times
        per_iter = min(per_iter, max(4, trials // 4))
    try:
        with _ms_logging():
            ms.tune.tune_tasks(
                tasks=list(contexts),
                task_weights=list(weights),
                work_dir=work_dir,
                max_trials_global=int(sum(missing)),
                max_trials_per_task=int(max(missing)),
                num_trials_per_iter=per_iter,
                builder=classes["InProcessBuilder"](in_memory),
                runner=runner,
                database=db,
                cost_model=_cost_model(),
                measure_callbacks=callbacks,
                task_scheduler="gradient",
            )
    finally:
        _INPROC_ARTIFACTS.clear()  # candidates built but never run (a terminated task)
    return {"deadline_hit": bool(monitor.hit), "errors": list(monitor.errors)}


def _tir_contexts(mod, tgt, work_dir: str, trials: int, seed: int) -> list:
    """One ``TuneContext`` per PrimFunc of ``mod``, as ``ms.tune_tir`` makes them."""
    from tvm import tirx
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    named = sorted(((gv.name_hint, f) for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc)),
                   key=lambda x: x[0])
    names = [n for n, _ in named]
    strategy = _search_strategy(trials)
    with _ms_logging():  # get_loggers_from_work_dir runs dictConfig
        loggers = get_loggers_from_work_dir(work_dir, names)
    return [
        ms.TuneContext(mod=func, target=tgt, space_generator="post-order-apply", search_strategy=strategy,
                       task_name=name, rand_state=rand_state, num_threads=os.cpu_count() or 1, logger=logger).clone()
        for (name, func), logger, rand_state in zip(named, loggers, fork_seed(seed, n=len(named)))
    ]


def _tune(mod, tgt, trials: int, work_dir: str, seconds: float | None, runner, seed: int,
          in_memory: bool = False) -> dict[str, Any]:
    """Tune ``mod`` into the JSON database; returns the best schedule's module and bookkeeping."""
    from tvm.s_tir import meta_schedule as ms

    _ensure_tensor_intrin(tgt.kind.name)
    os.makedirs(work_dir, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
    have = len(_records_for(db, mod, tgt))
    info: dict[str, Any] = {"reused": have >= trials, "new_trials": 0, "deadline_hit": False, "errors": []}
    t0 = time.time()
    if have < trials:
        contexts = _tir_contexts(mod, tgt, work_dir, trials, seed)
        info.update(run_tuning(contexts, [1.0] * len(contexts), work_dir, db, trials, [trials - have] * len(contexts),
                               seconds, runner, in_memory))
        db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")  # re-read from disk
    recs = _records_for(db, mod, tgt)
    info["new_trials"] = max(0, len(recs) - have)
    info["records"] = len(recs)
    info["tuning_s"] = time.time() - t0
    info["mod"] = _apply_record(mod, recs[0]) if recs else None
    return info


def tuning_failure_note(info: Mapping[str, Any], trials: int, what: str = "trials") -> str:
    """The note of a tuning that left no valid record (``info``: from :func:`run_tuning`)."""
    why = "tuning time budget ran out" if info.get("deadline_hit") else "no valid trial"
    errs = f"; first errors: {' || '.join(info['errors'])}" if info.get("errors") else ""
    return f"tune: {why} ({trials} {what} asked){errs}"


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


def time_main(mod, dev, args, protocol: TimingProtocol = PROTOCOL) -> list[float]:
    """THE timing protocol (steps 2-3 of the module docstring) applied to ``mod["main"](*args)``: ``mod`` is a
    runtime module (a kernel, local or remote) or a Relax ``VirtualMachine`` (a whole model, :mod:`e2e`).
    Returns the ``repeat`` per-measurement means in ms (:func:`_summarize` gives median and IQR)."""
    fn = mod["main"]
    for _ in range(max(0, protocol.warmup)):
        fn(*args)
    dev.sync()
    evaluator = mod.time_evaluator(
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
    runner: str | None = None,
) -> Latency:
    """Tune (``trials > 0``) and time a program dict / PrimFunc / IRModule / ``(inputs, out)`` TE pair.

    ``trials=0``: TVM's default schedule (DLight defaults on CUDA), no database.
    ``seconds``: tuning time budget (soft, checked after each batch; hard when ``isolate=True``).
    ``build_target``: what to compile for when ``target`` is ``rpc:...`` (default: the host llvm target).
    ``isolate``: run in a child process, killed after ``seconds + isolate_grace_s`` (no limit without ``seconds``).
    ``runner``: how candidates are measured on a local target, ``"local"`` (default: a worker process) or
    ``"inprocess"`` (faster, not crash-proof; see :func:`make_runner`).
    Never raises: a failure gives ``median_ms=None`` with the reason in ``note``."""
    name = target if isinstance(target, str) else str(target)
    try:
        spec = parse_target(target)
        name = spec.name
    except Exception as exc:
        return Latency.failed(str(target), f"target: {exc}")
    if isolate:
        return _run_isolated(
            program_or_primfunc, target, trials, work_dir, seconds, protocol, build_target, seed, isolate_grace_s,
            runner,
        )
    runner_kind = runner
    stage = "lower"
    tuned_trials, tuning_s, reused, notes = 0, None, False, []
    try:
        import tvm

        from syno_automl.codegen.tvm import default_gpu_schedule, device_for

        mod = _to_irmodule(program_or_primfunc)
        stage = "target"
        tgt, why = resolve_target(spec, target, build_target)
        if tgt is None:
            return Latency.failed(name, why)
        sched_mod = mod
        if trials > 0:
            stage = "tune"
            runner, in_memory = make_runner(spec, runner_kind, rpc_session_timeout)
            wd = work_dir or DEFAULT_WORK_DIR
            if spec.kind == "rpc":  # records measured on a board stay apart from the host's (same Target)
                wd = os.path.join(wd, "rpc-" + slug(spec.key))
            try:
                info = _tune(mod, tgt, int(trials), wd, seconds, runner, seed, in_memory)
            finally:
                _close_runner(runner)
            tuned_trials, tuning_s, reused = info["records"], info["tuning_s"], info["reused"]
            if info["mod"] is None:
                return Latency.failed(name, tuning_failure_note(info, trials), 0, tuning_s)
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
            samples = time_main(exe.mod, dev, _random_args(func, dev, seed), protocol)
        med, iqr = _summarize(samples)
        return Latency(med, iqr, len(samples), name, tuned_trials, "; ".join(notes), samples, reused, tuning_s)
    except Exception as exc:
        return failed_at(name, stage, exc, tuned_trials, tuning_s, "tune_and_time")


def error_note(stage: str, exc: BaseException) -> str:
    """``stage: ExceptionType: last line of the message`` (at most 500 characters): every recorded failure."""
    text = str(exc).strip()
    return f"{stage}: {type(exc).__name__}: {text.splitlines()[-1][:500] if text else ''}"


def failed_at(name: str, stage: str, exc: BaseException, tuned_trials: int = 0, tuning_s: float | None = None,
              what: str = "latency") -> Latency:
    """Inside an ``except``: the Latency of a measurement that failed at ``stage``; with the debugging aid
    ``SYNO_LATENCY_RAISE=1`` the exception propagates instead."""
    if os.environ.get("SYNO_LATENCY_RAISE") == "1":
        raise  # the exception being handled by the caller
    _log.debug("%s failed at %s", what, stage, exc_info=True)
    return Latency.failed(name, error_note(stage, exc), tuned_trials, tuning_s)


def _close_runner(runner) -> None:
    """Kill the runner's worker processes now (they would otherwise live until garbage collection)."""
    try:
        pool = getattr(runner, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
    except Exception:  # best effort
        pass


def upload_remote(exe, tgt, spec: _TargetSpec, timeout: float, filename: str = "kernel.so"):
    """Export ``exe`` (a compiled kernel or Relax VM executable), upload it to the board behind the tracker
    and load it there; returns ``(remote module, remote device, session)`` (keep the session while timing)."""
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


def _time_remote(exe, func, tgt, spec: _TargetSpec, protocol: TimingProtocol, timeout: float) -> list[float]:
    """Export the library, upload it through the tracker's session, time it remotely."""
    rmod, dev, _remote = upload_remote(exe, tgt, spec, timeout)
    return time_main(rmod, dev, _random_args(func, dev), protocol)


# --------------------------------------------------------------------------------------------------
# isolation in a child process (hard timeout, crash shield)
# --------------------------------------------------------------------------------------------------


def _run_isolated(obj, target, trials, work_dir, seconds, protocol, build_target, seed, grace,
                  runner=None) -> Latency:
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
            "runner": runner,
        }
    except Exception as exc:
        return Latency.failed(name, f"lower: {type(exc).__name__}: {exc}")
    with tempfile.TemporaryDirectory(prefix="syno_lat_") as tmp:
        job_path, out_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "result.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        return run_child("syno_automl.latency", [job_path, out_path], out_path, name, seconds, grace)


def run_child(module: str, argv: Sequence[str], out_path: str, name: str, seconds: float | None,
              grace: float) -> Latency:
    """``python -m module *argv`` in a new session, killed after ``seconds + grace`` (no limit without
    ``seconds``); the :class:`Latency` it wrote as JSON to ``out_path``, or why there is none."""
    limit = (seconds + grace) if seconds is not None else None
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", module, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
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
        runner=job.get("runner"),
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
# one operator, every device: the metrics as MLflow logs them
# --------------------------------------------------------------------------------------------------


def infer_baseline(program: Mapping[str, Any], kernel_size: int | None = None) -> dict[str, Any] | None:
    """The layer an operator of this program's shapes replaces, or None when there is no obvious one.

    * ``[N, C_in, H, W] -> [N, C_out, H', W']`` with ``H' = ceil(H / s)``, ``W' = ceil(W / s)`` (same ``s``):
      conv2d NCHW, ``k x k`` (``kernel_size``, default 3), zero padding ``k // 2``, stride ``s``, no bias;
    * ``[N, C_in] -> [N, C_out]``: dense (``x @ w.T``, torch's Linear without bias).

    Returns ``{"kind": "conv2d", "N":, "C_in":, "C_out":, "H":, "W":, "k":, "stride":}`` or
    ``{"kind": "dense", "N":, "C_in":, "C_out":}``."""
    i, o = [int(v) for v in program["input"]["shape"]], [int(v) for v in program["output"]["shape"]]
    if len(i) == 4 and len(o) == 4 and i[0] == o[0]:
        N, C_in, H, W = i
        _, C_out, Ho, Wo = o
        k = int(kernel_size or 3)
        for s in range(1, max(H, W) + 1):
            if -(-H // s) == Ho and -(-W // s) == Wo:
                return {"kind": "conv2d", "N": N, "C_in": C_in, "C_out": C_out, "H": H, "W": W, "k": k, "stride": s}
        return None
    if len(i) == 2 and len(o) == 2 and i[0] == o[0]:
        return {"kind": "dense", "N": i[0], "C_in": i[1], "C_out": o[1]}
    return None


def _baseline_kernel(desc: Mapping[str, Any]):
    if desc["kind"] == "conv2d":
        return conv2d_nchw_te(desc["N"], desc["C_in"], desc["C_out"], desc["H"], desc["W"], desc["k"],
                              stride=desc["stride"])
    return dense_te(desc["N"], desc["C_in"], desc["C_out"])


def _baseline_module(desc: Mapping[str, Any]):
    from torch import nn

    if desc["kind"] == "conv2d":
        return nn.Conv2d(desc["C_in"], desc["C_out"], desc["k"], stride=desc["stride"], padding=desc["k"] // 2,
                         bias=False)
    return nn.Linear(desc["C_in"], desc["C_out"], bias=False)


def _describe(desc: Mapping[str, Any]) -> str:
    if desc["kind"] == "conv2d":
        return (f"conv2d {desc['C_in']}->{desc['C_out']} {desc['H']}x{desc['W']} k={desc['k']} "
                f"s={desc['stride']} N={desc['N']}")
    return f"dense {desc['C_in']}->{desc['C_out']} N={desc['N']}"


def _torch_device(target: Any) -> tuple[str | None, str]:
    """(torch device for the Inductor timing of this target, or None; the reason when None)."""
    spec = parse_target(target)
    if spec.kind == "rpc":
        return None, "inductor: not available on a remote (RPC) board"
    try:
        from syno_automl.codegen.tvm import make_target

        kind = make_target(target).kind.name
    except Exception as exc:
        return None, f"inductor: target: {exc}"
    if kind in ("llvm", "c"):
        return "cpu", ""
    if kind == "cuda":
        import torch

        return ("cuda", "") if torch.cuda.is_available() else (None, "inductor: no CUDA device for torch")
    return None, f"inductor: no torch device for target kind {kind}"


def measure_operator(
    op,
    mapping: Any = None,
    *,
    baseline: Any = "auto",
    torch_baseline: Any = None,
    targets: Sequence[Any] = ("llvm",),
    trials: int = 0,
    work_dir: str | None = None,
    seconds: float | None = None,
    inductor: bool = True,
    kernel_size: int | None = None,
    protocol: TimingProtocol = PROTOCOL,
    isolate: bool = False,
    seed: int = 0,
    runner: str | None = None,
    details: bool = False,
) -> dict[str, Any]:
    """Tuned latency of an operator and of the layer it replaces, on every target, as MLflow metrics.

    ``op``: an :class:`~syno_automl.space.Operator` (lowered with ``op.program(mapping)``) or a program dict.
    ``baseline``: ``"auto"`` (inferred from the program's shapes, :func:`infer_baseline`: conv2d NCHW of the
    same shape for conv specs, dense for linear specs), ``"conv2d"``, ``"dense"`` (the same, but it must
    match), ``None`` (no speedups), or an explicit kernel: a PrimFunc / IRModule / ``(inputs, out)`` TE pair /
    program dict, or a callable ``program -> kernel``. ``torch_baseline``: the torch module (or callable
    ``program -> module``) timed under Inductor against ``op.to_module(mapping)``; built automatically for
    conv2d/dense baselines. ``kernel_size``: ``k`` of the conv baseline (default: the mapping's ``k``, else 3).

    Every kernel (operator and baseline, each target) is tuned with ``trials`` MetaSchedule trials (and the
    ``seconds`` tuning budget) and timed with ``protocol``: see :func:`tune_and_time` (also for ``isolate``
    and ``runner``).

    Returns, for each target with ``<device>`` = :func:`device_name` (``llvm``, ``cuda``, ``rpc-KEY``)::

        {"latency_ms.<device>": float | None,            # the operator, TVM-tuned
         "speedup.<device>": float | None,               # baseline / operator, same budget and protocol
         "latency_ms.inductor-<device>": float | None,   # the operator's torch module under torch.compile
         "speedup.inductor-<device>": float | None,      # torch baseline / operator, both under torch.compile
         "notes": {metric name: why it is missing, ...}} # only for missing values
    (the inductor keys only with ``inductor=True``), plus ``"details": {name: Latency.to_dict()}`` with
    ``details=True`` (names ``operator.<device>``, ``baseline.<device>``, ``operator.inductor-<device>``,
    ``baseline.inductor-<device>``). Never raises for a tuning/build/timing failure."""
    result: dict[str, Any] = {}
    notes: dict[str, str] = {}
    info: dict[str, Any] = {}
    module = None
    try:
        if isinstance(op, Mapping):
            program = json.loads(json.dumps(op))
        else:
            program = op.program(mapping)
            if kernel_size is None:
                try:
                    full = op.space.mapping(mapping) if isinstance(mapping, int) else (
                        {**op.space.mapping(0), **dict(mapping)} if mapping is not None else op.space.mapping(0))
                    kernel_size = full.get("k")
                except Exception:
                    kernel_size = None
    except Exception as exc:
        reason = f"lower: {type(exc).__name__}: {exc}"
        for t in targets:
            dev = _safe_device_name(t)
            keys = [f"latency_ms.{dev}", f"speedup.{dev}"]
            if inductor:
                keys += [f"latency_ms.inductor-{dev}", f"speedup.inductor-{dev}"]
            for key in keys:
                result[key] = None
                notes[key] = reason
        result["notes"] = notes
        return result

    # the baseline kernel (TVM) and module (torch)
    base_kernel, base_reason, desc = None, "", None
    try:
        if baseline is None:
            base_reason = "no baseline asked"
        elif isinstance(baseline, str):
            desc = infer_baseline(program, kernel_size)
            if baseline not in ("auto", "conv2d", "dense"):
                raise ValueError(f"unknown baseline {baseline!r} (auto, conv2d, dense, None, a kernel or a callable)")
            if desc is None or (baseline != "auto" and desc["kind"] != baseline):
                raise ValueError(f"no {'' if baseline == 'auto' else baseline + ' '}baseline for "
                                 f"{program['input']['shape']} -> {program['output']['shape']}")
            base_kernel = _baseline_kernel(desc)
            info["baseline"] = _describe(desc)
        elif callable(baseline) and not _is_kernel(baseline):
            base_kernel = baseline(program)
        else:
            base_kernel = baseline
    except Exception as exc:
        base_reason = f"baseline: {type(exc).__name__}: {exc}"
    base_module, module_reason = None, ""
    if inductor:
        try:
            if torch_baseline is not None:
                import torch

                base_module = torch_baseline if isinstance(torch_baseline, torch.nn.Module) else torch_baseline(program)
            elif desc is not None:
                base_module = _baseline_module(desc)
            else:
                module_reason = base_reason or "inductor: no torch baseline for an explicit kernel baseline"
        except Exception as exc:
            module_reason = f"inductor baseline: {type(exc).__name__}: {exc}"

    torch_cache: dict[str, tuple[Latency, Latency | None]] = {}
    for t in targets:
        dev = _safe_device_name(t)
        lat_key, sp_key = f"latency_ms.{dev}", f"speedup.{dev}"
        op_lat = tune_and_time(program, t, trials, work_dir, seconds, protocol=protocol, isolate=isolate, seed=seed,
                               runner=runner)
        result[lat_key] = op_lat.median_ms
        if not op_lat.ok:
            notes[lat_key] = op_lat.note
        info[f"operator.{dev}"] = op_lat.to_dict()
        base_lat = None
        if base_kernel is not None:
            base_lat = tune_and_time(base_kernel, t, trials, work_dir, seconds, protocol=protocol, isolate=isolate,
                                     seed=seed, runner=runner)
            info[f"baseline.{dev}"] = base_lat.to_dict()
        result[sp_key] = speedup(base_lat, op_lat) if base_lat is not None else None
        if result[sp_key] is None:
            notes[sp_key] = base_reason or (f"baseline: {base_lat.note}" if base_lat is not None and not base_lat.ok
                                            else f"operator: {op_lat.note}")
        if not inductor:
            continue
        ind_lat_key, ind_sp_key = f"latency_ms.inductor-{dev}", f"speedup.inductor-{dev}"
        tdev, why = _torch_device(t)
        if tdev is None:
            result[ind_lat_key] = result[ind_sp_key] = None
            notes[ind_lat_key] = notes[ind_sp_key] = why
            continue
        if tdev not in torch_cache:
            import torch

            x = torch.randn(*program["input"]["shape"], device=tdev, generator=None)
            try:
                if module is None:
                    module = op.to_module(mapping) if not isinstance(op, Mapping) else _module_from_program(program)
                ind_op = time_torch(module.to(tdev).eval(), (x,), compile=True, protocol=protocol)
            except Exception as exc:
                ind_op = Latency.failed(f"inductor-{tdev}", f"module: {type(exc).__name__}: {exc}")
            ind_base = None
            if base_module is not None:
                ind_base = time_torch(base_module.to(tdev).eval(), (x,), compile=True, protocol=protocol)
            torch_cache[tdev] = (ind_op, ind_base)
        ind_op, ind_base = torch_cache[tdev]
        result[ind_lat_key] = ind_op.median_ms
        if not ind_op.ok:
            notes[ind_lat_key] = ind_op.note
        result[ind_sp_key] = speedup(ind_base, ind_op) if ind_base is not None else None
        if result[ind_sp_key] is None:
            notes[ind_sp_key] = module_reason or (f"baseline: {ind_base.note}" if ind_base is not None
                                                  and not ind_base.ok else f"operator: {ind_op.note}")
        info[f"operator.inductor-{dev}"] = ind_op.to_dict()
        if ind_base is not None:
            info[f"baseline.inductor-{dev}"] = ind_base.to_dict()
    result["notes"] = notes
    if details:
        result["details"] = info
    return result


UNTUNED = "untuned default schedules (no MetaSchedule trials)"


def schedules_label(trials: int, seconds: float | None = None) -> str:
    """How the TVM kernels of a measurement were scheduled, for printed lines and stored results: ``trials == 0``
    gives :data:`UNTUNED` (never to be passed off as a tuned latency)."""
    if int(trials) <= 0:
        return UNTUNED
    return f"MetaSchedule, {int(trials)} trials per kernel" + (f", {seconds:g} s budget per kernel" if seconds else "")


def stored_entry(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What a study keeps of one device's :func:`measure_layers` summary (``syno.latency`` attrs, read by the
    report): totals, how the kernels were scheduled, and the Inductor totals when measured."""
    entry = {k: summary.get(k) for k in ("latency_ms", "baseline_ms", "speedup", "tuned_trials", "schedules",
                                         "seconds")}
    entry.update({k: summary[k] for k in ("inductor_ms", "inductor_baseline_ms", "inductor_speedup")
                  if summary.get(k) is not None})
    return entry


def _kernel_summary(d: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parts of a :class:`Latency` dict a tuning summary keeps (no samples)."""
    if d is None:
        return None
    return {"median_ms": d.get("median_ms"), "iqr_ms": d.get("spread_ms"), "repeats": d.get("repeats"),
            "tuned_trials": d.get("tuned_trials"), "reused": d.get("reused"), "tuning_s": d.get("tuning_s"),
            "note": d.get("note", "")}


def _sum_or_none(values: Sequence[float | None]) -> float | None:
    return float(sum(values)) if values and all(v is not None for v in values) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den is not None and den > 0 else None


def measure_layers(
    op,
    targets: Sequence[Any] = ("llvm",),
    trials: int = 32,
    seconds: float | None = None,
    *,
    work_dir: str | None = None,
    inductor: bool = True,
    protocol: TimingProtocol = PROTOCOL,
    isolate: bool = False,
    seed: int = 0,
    runner: str | None = None,
    fail_fast: bool = False,
    sizes: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Latency of an operator in every layer it replaces (every mapping of ``op.space``), summed, on every target.

    ``sizes`` overrides variables of every mapping, e.g. ``{"N": 1}`` to time at batch 1 (inference, as the
    paper's latency figures) rather than at the training batch the mappings were recorded with.

    Each layer is :func:`measure_operator` (operator and inferred baseline tuned with the same ``trials``
    MetaSchedule trials and ``seconds`` tuning budget per kernel, timed with ``protocol``; TorchInductor too
    with ``inductor``). ``fail_fast``: stop at the first layer without a TVM latency (operator or baseline) on
    some target (the remaining layers are not measured; the totals are then missing).

    Returns (``<device>`` = :func:`device_name`)::

        {"metrics": {"latency_ms.<device>":, "baseline_latency_ms.<device>":, "speedup.<device>":,
                     "latency_ms.inductor-<device>":, "baseline_latency_ms.inductor-<device>":,
                     "speedup.inductor-<device>":},   # sums over the layers; None when a layer is missing
         "notes": {metric name: "layer i: why it is missing"},
         "devices": {"<device>": {                    # JSON-able: the tuning summary of that device
             "target":, "trials":, "seconds":, "tuned_trials": (trials, 0 when untuned), "schedules": (label),
             "protocol": {...}, "latency_ms":, "baseline_ms":, "speedup":,
             "inductor_ms":, "inductor_baseline_ms":, "inductor_speedup":,  (with inductor)
             "layers": [{"layer": i, "sizes": {...}, "replaced": "conv2d ...", "operator": {median_ms, iqr_ms,
                         tuned_trials, reused, tuning_s, note}, "baseline": {...}, "speedup":,
                         "inductor": {"operator":, "baseline":, "speedup":}, "notes": {...}}, ...],
             "notes": {...}}}}
    (the inductor keys only with ``inductor=True``). Never raises for a lowering/tuning/build/timing failure."""
    space = op.space
    devices = [(t, _safe_device_name(t)) for t in targets]
    untuned = int(trials) <= 0
    summaries: dict[str, dict[str, Any]] = {
        dev: {"target": t if isinstance(t, str) else str(t), "trials": int(trials), "seconds": seconds,
              "tuned_trials": 0 if untuned else int(trials), "schedules": schedules_label(trials, seconds),
              "protocol": dataclasses.asdict(protocol), "layers": []}
        for t, dev in devices}
    for i in range(space.num_mappings):
        mapping: Any = i if not sizes else {**space.mapping(i), **sizes}
        m = measure_operator(op, mapping, targets=targets, trials=trials, work_dir=work_dir, seconds=seconds,
                             inductor=inductor, protocol=protocol, isolate=isolate, seed=seed, runner=runner,
                             details=True)
        info = m.get("details", {})
        failed = False
        for _, dev in devices:
            layer: dict[str, Any] = {
                "layer": i, "sizes": dict(space.mapping(i)) if not sizes else dict(mapping),
                "replaced": info.get("baseline"),
                "operator": _kernel_summary(info.get(f"operator.{dev}")),
                "baseline": _kernel_summary(info.get(f"baseline.{dev}")),
                "speedup": m.get(f"speedup.{dev}"),
                "notes": {k: v for k, v in m["notes"].items() if k.split(".", 1)[-1] in (dev, f"inductor-{dev}")},
            }
            if layer["operator"] is None:  # lowering failed: no kernel at all
                layer["operator"] = {"median_ms": None, "note": m["notes"].get(f"latency_ms.{dev}", "")}
            if inductor:
                layer["inductor"] = {"operator": _kernel_summary(info.get(f"operator.inductor-{dev}")),
                                     "baseline": _kernel_summary(info.get(f"baseline.inductor-{dev}")),
                                     "speedup": m.get(f"speedup.inductor-{dev}")}
            summaries[dev]["layers"].append(layer)
            failed = failed or m.get(f"latency_ms.{dev}") is None or (layer["baseline"] or {}).get("median_ms") is None
        if fail_fast and failed:
            break
    metrics: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    for _, dev in devices:
        s = summaries[dev]
        layers = s["layers"]
        complete = len(layers) == space.num_mappings

        def total(kind: str, which: str, key: str, fallback: str) -> float | None:
            """Sum over the layers of ``layer[kind][which]["median_ms"]`` (kind "": the TVM kernels); the first
            missing one gives the note of ``key`` (its own note, else the layer's note ``fallback``)."""
            values = []
            for layer in layers:
                entry = (layer.get(kind) or {}) if kind else layer
                lat = entry.get(which) or {}
                values.append(lat.get("median_ms"))
                if lat.get("median_ms") is None and key not in notes:
                    why = lat.get("note") or layer["notes"].get(fallback, "")
                    notes[key] = f"layer {layer['layer']}: {why or 'not measured'}"
            if not complete and key not in notes:
                notes[key] = f"layers {len(layers)}-{space.num_mappings - 1}: not measured (an earlier layer failed)"
            return _sum_or_none(values) if complete else None

        names = [("", dev, "latency_ms", "baseline_ms", "speedup")]
        if inductor:
            names.append(("inductor", f"inductor-{dev}", "inductor_ms", "inductor_baseline_ms", "inductor_speedup"))
        for kind, mdev, op_key, base_key, sp_key in names:
            lat_name, base_name, sp_name = f"latency_ms.{mdev}", f"baseline_latency_ms.{mdev}", f"speedup.{mdev}"
            s[op_key] = metrics[lat_name] = total(kind, "operator", lat_name, lat_name)
            s[base_key] = metrics[base_name] = total(kind, "baseline", base_name, sp_name)
            s[sp_key] = metrics[sp_name] = _ratio(s[base_key], s[op_key])
            if s[sp_key] is None and sp_name not in notes:
                notes[sp_name] = notes.get(base_name) or notes.get(lat_name) or "no speedup"
        s["notes"] = {k: v for k, v in notes.items() if k.split(".", 1)[-1] in (dev, f"inductor-{dev}")}
    return {"metrics": metrics, "notes": notes, "devices": summaries}


def _ms(lat: Mapping[str, Any] | None) -> str:
    lat = lat or {}
    if lat.get("median_ms") is None:
        return f"missing ({lat.get('note') or 'not measured'})"
    iqr = f" (IQR {lat['iqr_ms']:.4f})" if lat.get("iqr_ms") is not None else ""
    return f"{lat['median_ms']:.4f} ms{iqr}"


def layer_line(layer: Mapping[str, Any], schedules: str = "") -> str:
    """One printed line for a layer of :func:`measure_layers` (``devices[<device>]["layers"][i]``)."""
    op, base = layer.get("operator") or {}, layer.get("baseline") or {}
    what = layer.get("replaced") or ", ".join(f"{k}={v}" for k, v in (layer.get("sizes") or {}).items())
    if not base:
        base = {"note": next((v for k, v in layer.get("notes", {}).items() if k.startswith("speedup.")
                              and not k.startswith("speedup.inductor-")), "")}
    text = f"layer {layer['layer']} ({what}): operator {_ms(op)}, replaced layer {_ms(base)}"
    if layer.get("speedup") is not None:
        text += f" -> {layer['speedup']:.2f}x"
    if schedules == UNTUNED or (not schedules and not any(k.get("tuned_trials") for k in (op, base))):
        text += f" [{UNTUNED}]"
    else:
        reused = " (from the database)" if op.get("reused") and base.get("reused") else ""
        text += (f" [MetaSchedule-tuned: {op.get('tuned_trials') or 0} / {base.get('tuned_trials') or 0} trials "
                 f"(operator / replaced layer){reused}]")
    ind = layer.get("inductor")
    if ind is not None:
        if (ind.get("operator") or {}).get("median_ms") is None:
            why = (ind.get("operator") or {}).get("note") or next(
                (v for k, v in layer.get("notes", {}).items() if k.startswith("latency_ms.inductor-")), "")
            text += f"; inductor: missing ({why})"
        else:
            text += f"; inductor: operator {_ms(ind['operator'])}, replaced layer {_ms(ind.get('baseline'))}"
            if ind.get("speedup") is not None:
                text += f" -> {ind['speedup']:.2f}x"
    return text


def total_line(summary: Mapping[str, Any], device: str) -> str:
    """The printed total of one device of :func:`measure_layers` (``devices[<device>]``)."""
    n = len(summary["layers"])
    text = f"total over {n} layer{'s' if n != 1 else ''} on {device} [{summary['schedules']}]: "
    if summary.get("latency_ms") is None or summary.get("baseline_ms") is None:
        text += "missing (" + "; ".join(f"{k}: {v}" for k, v in summary.get("notes", {}).items()) + ")"
    else:
        text += (f"operator {summary['latency_ms']:.4f} ms vs replaced layers {summary['baseline_ms']:.4f} ms "
                 f"-> speedup {summary['speedup']:.2f}x")
    if "inductor_ms" in summary:
        if summary.get("inductor_ms") is None:
            why = next((v for k, v in summary.get("notes", {}).items() if k.startswith("latency_ms.inductor-")), "")
            text += f"; inductor: missing ({why})"
        else:
            text += f"; inductor: operator {summary['inductor_ms']:.4f} ms"
            if summary.get("inductor_baseline_ms") is not None:
                text += (f" vs replaced layers {summary['inductor_baseline_ms']:.4f} ms -> speedup "
                         f"{summary['inductor_speedup']:.2f}x")
    return text


def _safe_device_name(target: Any) -> str:
    try:
        return device_name(target)
    except Exception:
        return str(target)


def _is_kernel(obj: Any) -> bool:
    """A PrimFunc / IRModule (callable objects in TVM, but kernels here, not factories)."""
    try:
        import tvm

        return isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc))
    except Exception:
        return False


def _module_from_program(program: Mapping[str, Any]):
    from syno_automl.codegen.torch import build_module

    return build_module(program)


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
