"""InProcessBuilder's per-candidate build timeout: a candidate whose compile hangs becomes a failed BuilderResult with
the reason, its worker is restarted, and the other candidates of the batch still build. The hang is injected through
the builder's ``build_fn`` hook (runs in the compile worker), not by mocking TVM."""

from __future__ import annotations

import os

import pytest

tvm = pytest.importorskip("tvm")

from tvm import te  # noqa: E402
from tvm.s_tir.meta_schedule.builder import BuilderInput  # noqa: E402

from syno_automl.measure import metaschedule  # noqa: E402
from syno_automl.measure.compile_worker import shared_worker  # noqa: E402

pytestmark = pytest.mark.tvm
TIMEOUT_S = 5.0  # far above the 0.02-0.3 s compile of the tiny kernels, far below the injected hang


def _matmul(name: str) -> tvm.IRModule:
    a = te.placeholder((16, 16), "float32", name="A")
    b = te.placeholder((16, 16), "float32", name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({name: te.create_prim_func([a, b, c]).with_attr("global_symbol", name)})


def _inputs(*names: str) -> list[BuilderInput]:
    return [BuilderInput(_matmul(n), tvm.target.Target("llvm")) for n in names]


def _hook():
    """A build function (pickled by value into the worker) that hangs on a function named ``slow``, raises on one
    named ``bad`` and kills the worker on one named ``crash``; the others compile normally."""

    def build(mod, target, shared_library):
        import os
        import time

        from syno_automl.measure.compile_worker import compile_candidate

        names = {gv.name_hint for gv in mod.get_global_vars()}
        if "slow" in names:
            time.sleep(600)
        if "bad" in names:
            raise ValueError("injected codegen error")
        if "crash" in names:
            os._exit(3)
        return compile_candidate(mod, target, shared_library)

    return build


def test_hanging_candidate_times_out_and_the_others_build():
    restarts = shared_worker().restarts
    builder = metaschedule.InProcessBuilder(in_memory=True, timeout_s=TIMEOUT_S, build_fn=_hook())
    results = builder.build(_inputs("first", "slow", "last"))
    try:
        assert [r.error_msg is None for r in results] == [True, False, True]
        assert "build timed out after 5 s" in results[1].error_msg
        assert results[1].artifact_path is None
        assert shared_worker().restarts == restarts + 1  # the hung worker was killed
        for r, name in zip((results[0], results[2]), ("first", "last")):
            # in memory: the runtime module is loaded here, under the artifact path, for InProcessRunner
            rt_mod = metaschedule._ARTIFACTS[r.artifact_path]
            assert rt_mod.implements_function(name)
    finally:
        metaschedule._ARTIFACTS.clear()


def test_failing_candidate_carries_its_reason_and_the_worker_stays():
    restarts = shared_worker().restarts
    builder = metaschedule.InProcessBuilder(in_memory=False, timeout_s=TIMEOUT_S, build_fn=_hook())
    results = builder.build(_inputs("bad", "good"))
    assert results[0].artifact_path is None
    assert "ValueError: injected codegen error" in results[0].error_msg
    assert results[1].error_msg is None and results[1].artifact_path.endswith(".tar")
    assert os.path.getsize(results[1].artifact_path) > 0
    assert shared_worker().restarts == restarts  # an exception does not cost a worker restart


def test_default_builder_compiles_in_the_worker():
    results = metaschedule.InProcessBuilder().build(_inputs("main"))
    assert results[0].error_msg is None and os.path.exists(results[0].artifact_path)


def test_crashing_candidate_fails_alone():
    restarts = shared_worker().restarts
    results = metaschedule.InProcessBuilder(timeout_s=TIMEOUT_S, build_fn=_hook()).build(_inputs("crash", "after"))
    assert results[0].artifact_path is None and "compile worker died (exit code 3)" in results[0].error_msg
    assert results[1].error_msg is None and os.path.exists(results[1].artifact_path)
    assert shared_worker().restarts == restarts + 1


def test_worker_is_recycled_after_max_uses():
    from syno_automl.measure.compile_worker import CompileWorker

    def loaded():   # (nested: pickled by value into the worker)
        import sys

        return sorted(m for m in ("tvm", "torch") if sys.modules.get(m) is not None)

    worker = CompileWorker(max_uses=2)
    try:
        pids = [worker.call(os.getpid, ())[0] for _ in range(3)]
        modules = worker.call(loaded, ())
    finally:
        worker.close()
    assert pids[0] == pids[1] != pids[2] and os.getpid() not in pids
    assert modules == (["tvm"], None)   # TVM without torch (tvm_ffi imports it where it is not marked absent)
