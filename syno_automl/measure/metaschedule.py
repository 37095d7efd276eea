"""MetaSchedule, as this project drives it: builder, runner, tuning monitor, search strategy, and THE tuning loop.

* :class:`InProcessBuilder`: MetaSchedule's LocalBuilder spawns a fresh process pool per batch and every worker
  re-imports ``tvm.s_tir.tensor_intrin`` (30-60 s each on this machine); this one compiles in one persistent
  worker process (:mod:`~syno_automl.measure.compile_worker`) kept across batches, each candidate under a timeout
  (:data:`BUILD_TIMEOUT_S`, 60 s): a candidate whose compile hangs becomes a failed build, not a hung tuning.
* the runner (:func:`make_runner`): MetaSchedule's ``LocalRunner`` (default: a worker process, a crashing
  candidate only fails its trial), :class:`InProcessRunner` (``runner="inprocess"`` or ``$SYNO_MS_RUNNER``: no
  worker start, export or linking per candidate; not crash-proof), or ``RPCRunner`` for ``rpc:`` targets. Every
  candidate is measured with :data:`MS_EVALUATOR`.
* :class:`TuningMonitor`: stops a task whose design space is exhausted, stops every task past the deadline, keeps
  the first errors and reports progress (trials done of asked, best so far, elapsed) per kernel.
* the cost model (:func:`cost_model`): XGBoost, or :class:`UntrainedModel` for a budget within XGBoost's warm-up
  (where XGBoost predicts at random anyway, yet retrains after every batch).
* :func:`run_tuning`: the loop every kernel and every model goes through; it returns a :class:`TuningInfo`.

This module imports tvm: import it only where TVM is needed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner
from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture, default_alloc_argument
from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

from syno_automl.echo import shown
from syno_automl.errors import InternalError, OptionError
from syno_automl.measure.compile_worker import BUILD_TIMEOUT_S, BuildFn, compile_candidate, shared_worker
from syno_automl.measure.request import MeasureRequest
from syno_automl.measure.target import TargetSpec

__all__ = ["BUILD_TIMEOUT_S", "InProcessBuilder", "InProcessRunner", "TuningMonitor", "TuningInfo", "MS_EVALUATOR",
           "make_runner", "close_runner", "open_runner", "XGB_WARMUP_SAMPLES", "UntrainedModel", "cost_model",
           "search_strategy", "ms_logging", "ensure_tensor_intrin", "labelled", "run_tuning", "tuning_failure_note",
           "Progress"]

Progress = Callable[[str], None]  # receives one line of progress text

MS_EVALUATOR = {"number": 3, "repeat": 1, "min_repeat_ms": 20}  # how MetaSchedule measures each candidate

_ARTIFACTS: dict[str, Any] = {}  # InProcessBuilder(in_memory=True) -> InProcessRunner


@dataclass
class TuningInfo:
    """The bookkeeping of one tuning call (a kernel, or every task of a model)."""

    reused: bool = False          # every task already had its budget: no new trial was run
    new_trials: int = 0
    records: int = 0              # valid records of the workload(s) after tuning
    tuning_s: float = 0.0
    deadline_hit: bool = False
    errors: list[str] = field(default_factory=list)  # the first build/run errors
    tasks: int = 1
    tuned_tasks: int = 0
    untuned_tasks: int = 0        # tasks left without a valid record (default schedules)
    skipped: list[str] = field(default_factory=list)  # tasks never tuned (integer inputs)
    best: Any = None              # the tuned module (a kernel) or the database (a model)


def tuning_failure_note(info: TuningInfo, trials: int, what: str = "trials") -> str:
    """The note of a tuning that left no valid record."""
    why = "tuning time budget ran out" if info.deadline_hit else "no valid trial"
    errs = f"; first errors: {' || '.join(info.errors)}" if info.errors else ""
    return f"tune: {why} ({trials} {what} asked){errs}"


@derived_object
class InProcessBuilder(PyBuilder):
    """Compiles every candidate in this process's persistent compile worker
    (:func:`~syno_automl.measure.compile_worker.shared_worker`: one child reused across batches and tuning calls;
    about 0.01 s of overhead per candidate, plus 0.1 s to link a ``.so`` with ``in_memory=True``), each under
    ``timeout_s`` (default :data:`~syno_automl.measure.compile_worker.BUILD_TIMEOUT_S`, 60 s): a candidate whose
    compile runs longer (an LLVM codegen was seen to run > 40 min) becomes a failed build, ``"build timed out after
    60 s"``, its worker is killed and restarted, and tuning goes on. ``timeout_s=None``: compile in this process,
    unguarded (the old behaviour).

    ``in_memory=False``: the artifact is a tar for a runner in another process (LocalRunner, RPCRunner);
    ``in_memory=True``: the worker exports a ``.so``, loaded here and kept under its path for
    :class:`InProcessRunner`. ``build_fn`` (default :func:`~syno_automl.measure.compile_worker.compile_candidate`)
    runs in the worker and must be picklable by cloudpickle: a test hook."""

    def __init__(self, in_memory: bool = False, timeout_s: float | None = BUILD_TIMEOUT_S,
                 build_fn: BuildFn | None = None):
        super().__init__()
        self.in_memory = in_memory
        self.timeout_s = timeout_s
        self.build_fn = build_fn or compile_candidate

    def build(self, build_inputs):
        results = []
        for bi in build_inputs:
            try:
                if self.timeout_s is None:
                    path, why = self.build_fn(bi.mod, bi.target, self.in_memory), None
                else:
                    path, why = shared_worker().call(self.build_fn, (bi.mod, bi.target, self.in_memory),
                                                     self.timeout_s)
                if why is None and self.in_memory:
                    _ARTIFACTS[path] = tvm.runtime.load_module(path)
            except Exception as exc:  # noqa: BLE001 -- one bad candidate must not stop the search
                path, why = None, f"{type(exc).__name__}: {exc}"
            results.append(BuilderResult(None, f"InProcessBuilder: {why}") if why is not None
                           else BuilderResult(path, None))
        return results


@derived_object
class InProcessRunner(PyRunner):
    """Times the candidates of :class:`InProcessBuilder` (``in_memory=True``) in this process, as LocalRunner does
    in its worker (random inputs, ``time_evaluator`` with the evaluator config), without a worker process, export
    or linking: about 1-2 s less per candidate here. A candidate that crashes takes the process down: run under
    ``isolate=True`` to be shielded."""

    def __init__(self, evaluator_config=None, alloc_repeat: int = 1):
        super().__init__()
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.alloc_repeat = alloc_repeat

    def run(self, runner_inputs):
        futures = []
        for ri in runner_inputs:
            rt_mod = _ARTIFACTS.pop(str(ri.artifact_path), None)
            try:
                if rt_mod is None:
                    raise InternalError(f"no in-process artifact {shown(ri.artifact_path)}")
                dev = tvm.runtime.device(str(ri.device_type), 0)
                args = default_alloc_argument(dev, tuple(a.as_json() for a in ri.args_info), self.alloc_repeat)
                costs = run_evaluator_common(rt_mod, dev, self.evaluator_config, args)
                futures.append(LocalRunnerFuture(res=costs, error_message=None))
            except Exception as exc:  # noqa: BLE001 -- one bad candidate must not stop the search
                futures.append(LocalRunnerFuture(res=None, error_message=f"InProcessRunner: {type(exc).__name__}: "
                                                                         f"{exc}"))
        return futures


@derived_object
class TuningMonitor(PyMeasureCallback):
    """After each measured batch: keeps the first build/run errors (for the note), reports progress, terminates
    the task once the wall-clock deadline has passed.

    A task whose search comes back with no new candidate (its design space is exhausted: small injective kernels
    after a trial or two) is terminated at once: MetaSchedule would otherwise keep asking, a few seconds each
    time, until its retry limit. ``progress`` gets one line per batch: ``<label> <task>: done/asked trials, best
    so far, elapsed``."""

    def __init__(self, deadline: float, asked: Sequence[int] = (), progress: Progress | None = None,
                 label: str = ""):
        super().__init__()
        self.deadline = deadline
        self.hit = False
        self.exhausted = 0
        self.errors: list[str] = []
        self.asked = list(asked)
        self.done: dict[int, int] = {}
        self.best: dict[int, float] = {}
        self.progress = progress
        self.label = label
        self.start = time.time()

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        record = task_scheduler.tasks_[task_id]
        if len(measure_candidates) == 0 and not record.is_terminated:
            self.exhausted += 1
            task_scheduler.terminate_task(task_id)
        for br, rr in zip(builder_results, runner_results):
            msg = br.error_msg or (rr.error_msg if rr is not None else None)
            if msg and len(self.errors) < 3:
                self.errors.append(" ".join(str(msg).split())[:300])
            secs = [float(s) for s in (rr.run_secs or [])] if rr is not None and not msg else []
            if secs:
                ms_ = sum(secs) / len(secs) * 1e3
                self.best[task_id] = min(ms_, self.best.get(task_id, float("inf")))
        self.done[task_id] = self.done.get(task_id, 0) + len(measure_candidates)
        if self.progress is not None:
            asked = self.asked[task_id] if task_id < len(self.asked) else "?"
            best = f"best {self.best[task_id]:.4f} ms" if task_id in self.best else "no valid trial yet"
            name = str(getattr(record.ctx, "task_name", task_id))
            self.progress(f"{self.label}{name}: {self.done[task_id]}/{asked} trials, {best}, "
                          f"{time.time() - self.start:.0f} s")
        if time.time() >= self.deadline:
            self.hit = True
            # every task still open (a Relax model has several), the current one included
            for i, rec in enumerate(task_scheduler.tasks_):
                if not rec.is_terminated:
                    task_scheduler.terminate_task(i)


def search_strategy(trials: int):
    """Evolutionary search sized to the budget: the default (population 512, 4 genetic rounds) spends a minute or
    more in the cost model before the first measurement, which dwarfs a handful of trials. Eight candidates a trial
    (from 4 trials on as before; below, no floor of 32: a population of 32 for 1 or 2 trials cost ~1 s of CPU a
    tuning here, about half of the search)."""
    if trials >= 256:
        return "evolutionary"
    pop = int(min(512, max(8, 8 * trials)))
    return ms.search_strategy.EvolutionarySearch(
        population_size=pop,
        init_min_unmeasured=min(50, pop),
        genetic_num_iters=1 if trials < 64 else 3,
    )


# XGBModel's num_warmup_samples: it predicts uniform random scores until it holds this many measurements
XGB_WARMUP_SAMPLES = 100


@derived_object
class UntrainedModel(PyCostModel):
    """What XGBModel predicts before its warm-up (:data:`XGB_WARMUP_SAMPLES` measurements): uniform random scores,
    here from its own seeded generator (numpy's global one is left as it was), and no training. XGBModel retrains
    after every measured batch all the same (about 2 s a batch here), for predictions it never makes below the
    warm-up."""

    def __init__(self, seed: int = 0):
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def load(self, path: str) -> None:
        pass

    def save(self, path: str) -> None:
        pass

    def update(self, context, candidates, results) -> None:
        pass

    def predict(self, context, candidates) -> np.ndarray:
        return self.rng.uniform(size=len(candidates))


def cost_model(trials: int | None = None, seed: int = 0):
    """The cost model of a tuning of ``trials`` measurements in all (None: unknown). XGBoost guides the search where
    it is installed (the ``tvm`` extra brings xgboost-cpu) and the budget goes past its warm-up; at most
    :data:`XGB_WARMUP_SAMPLES` trials, XGBoost would only ever predict at random: :class:`UntrainedModel` (seeded
    with ``seed``) does the same without the training. Without xgboost MetaSchedule still tunes, with a random cost
    model, rather than failing."""
    if trials is not None and trials <= XGB_WARMUP_SAMPLES:
        return UntrainedModel(seed)
    return "xgb" if importlib.util.find_spec("xgboost") is not None else "random"


@contextlib.contextmanager
def ms_logging() -> Iterator[None]:
    """MetaSchedule (re)configures its loggers with ``logging.config.dictConfig`` on every tuning call, listing the
    handlers already on ``tvm.s_tir.meta_schedule`` by name: an unnamed one (e.g. pytest's LogCaptureHandler)
    makes it fail with ``'NoneType' object has no attribute 'format'``. Detach unnamed handlers for the call;
    keep the console quiet (WARNING; the per-work_dir log files still get DEBUG)."""
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


def ensure_tensor_intrin(kind: str) -> None:
    """Register only the tensor intrinsics the target can use.

    ``import tvm.s_tir.tensor_intrin`` (done by ``TuneContext`` and MetaSchedule's default builder) registers the
    intrinsics of every backend; on this machine it takes about a minute, almost all of it the CUDA ones. Unless
    ``SYNO_TVM_FULL_INTRIN=1``, the package is registered empty and only the submodules for ``kind`` are imported
    (x86/arm for llvm, cuda for cuda); later imports of the package then find it in ``sys.modules``."""
    import tvm.s_tir

    name = "tvm.s_tir.tensor_intrin"
    if os.environ.get("SYNO_TVM_FULL_INTRIN") == "1":
        importlib.import_module(name)
        return
    if name not in sys.modules:
        spec = importlib.util.find_spec(name)
        assert spec is not None  # a module of TVM's, which was imported above
        module = importlib.util.module_from_spec(spec)  # a package object; its __init__ is NOT run
        sys.modules[name] = module
        tvm.s_tir.tensor_intrin = module
    mod = sys.modules[name]
    if not hasattr(mod, "__path__"):  # a full import happened earlier: everything is registered
        return
    if kind in ("llvm", "c"):
        subs = ["arm_cpu"] if platform.machine().lower() in ("aarch64", "arm64") else ["x86"]
    elif kind == "cuda":
        subs = ["cuda"]
    else:
        subs = []
    for sub in subs:
        importlib.import_module(f"{name}.{sub}")


def make_runner(spec: TargetSpec, kind: str | None = None, rpc_session_timeout: float = 120.0):
    """The MetaSchedule runner for a target: ``(runner, in_memory)``.

    RPC targets: ``RPCRunner`` through the tracker. Local targets: ``kind`` (default: ``$SYNO_MS_RUNNER``, else
    ``"local"``) is ``"local"`` (``LocalRunner``: a candidate that crashes only fails its trial) or ``"inprocess"``
    (:class:`InProcessRunner` with an in-memory :class:`InProcessBuilder`: 1-2 s less per candidate, but a crashing
    candidate takes the process down: use it under ``isolate=True``)."""
    evaluator = ms.runner.EvaluatorConfig(**MS_EVALUATOR)
    if spec.kind == "rpc":
        return ms.runner.RPCRunner(
            rpc_config=ms.runner.RPCConfig(tracker_host=spec.host, tracker_port=spec.port, tracker_key=spec.key,
                                           session_timeout_sec=int(rpc_session_timeout)),
            evaluator_config=evaluator,
        ), False
    kind = kind or os.environ.get("SYNO_MS_RUNNER") or "local"
    if kind == "inprocess":
        return InProcessRunner(evaluator), True
    if kind == "local":
        return ms.runner.LocalRunner(timeout_sec=60, evaluator_config=evaluator), False
    raise OptionError(f"unknown runner {shown(kind)}: 'inprocess' or 'local'")


def close_runner(runner) -> None:
    """Kill the runner's worker processes now (they would otherwise live until garbage collection)."""
    try:
        pool = getattr(runner, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
    except Exception:  # noqa: BLE001 -- best effort
        pass


@contextlib.contextmanager
def open_runner(spec: TargetSpec, kind: str | None = None, rpc_session_timeout: float = 120.0):
    """:func:`make_runner`'s ``(runner, in_memory)``, its worker processes killed on leaving the block."""
    runner, in_memory = make_runner(spec, kind, rpc_session_timeout)
    try:
        yield runner, in_memory
    finally:
        close_runner(runner)


def labelled(progress: Progress | None, label: str) -> Progress | None:
    """``progress`` with ``label`` before every line (None stays None)."""
    if progress is None or not label:
        return progress
    return lambda line: progress(label + line)


def run_tuning(contexts, weights, missing: Sequence[int], db, work_dir: str, runner, request: MeasureRequest, *,
               in_memory: bool = False, progress: Progress | None = None,
               build_timeout_s: float | None = BUILD_TIMEOUT_S) -> TuningInfo:
    """THE MetaSchedule tuning loop of this project (one kernel: ``kernel.tune_kernel``; every fused kernel of a
    Relax model: ``model.tune_model``).

    ``contexts``/``weights``: the tasks (``TuneContext``, made with :func:`search_strategy` ``(request.trials)``)
    and their weights; ``missing``: how many trials each task still needs; records go to ``db`` (logs under
    ``work_dir``). Candidates are compiled by :class:`InProcessBuilder` (each under ``build_timeout_s``: a longer
    compile is a failed trial) and measured by ``runner``; a :class:`TuningMonitor` stops exhausted tasks and,
    past the ``request.seconds`` deadline, every task, and reports ``progress`` (see :func:`labelled`). Returns
    ``deadline_hit`` and ``errors``."""
    trials, seconds = request.trials, request.seconds
    monitor = TuningMonitor(time.time() + seconds if seconds else float("inf"), list(missing), progress)
    callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [monitor]
    per_iter = int(min(64, max(1, max(missing))))
    if seconds:  # with a time budget, check it at least about 4 times
        per_iter = min(per_iter, max(4, trials // 4))
    if build_timeout_s is not None:
        shared_worker().start()  # its start (import tvm, ~1.5 s) overlaps the search's first population
    try:
        with ms_logging():
            ms.tune.tune_tasks(
                tasks=list(contexts),
                task_weights=list(weights),
                work_dir=work_dir,
                max_trials_global=int(sum(missing)),
                max_trials_per_task=int(max(missing)),
                num_trials_per_iter=per_iter,
                builder=InProcessBuilder(in_memory, build_timeout_s),
                runner=runner,
                database=db,
                cost_model=cost_model(int(sum(missing)), request.seed),
                measure_callbacks=callbacks,
                task_scheduler="gradient",
            )
    finally:
        _ARTIFACTS.clear()  # candidates built but never run (a terminated task)
    return TuningInfo(deadline_hit=bool(monitor.hit), errors=list(monitor.errors))

