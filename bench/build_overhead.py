"""Per-candidate cost of InProcessBuilder's compile worker (build timeout) against compiling in this process.

    PYTHONPATH=. python bench/build_overhead.py [--candidates 12] [--repeat 2]

Candidates: MetaSchedule design-space samples (``post-order-apply``, one seed each) of the TE conv2d of the ResNet-34
64->128 28² layer (3x3, batch 1), llvm target, 1 core. Each candidate is built alone (one-element batch), as:

* ``inproc tar`` / ``inproc mem``: the builder before the timeout (baseline): ``tvm.compile`` in this process, then
  a tar export (for LocalRunner) or the runtime module kept in memory (for InProcessRunner);
* ``worker tar`` / ``worker mem``: ``InProcessBuilder(in_memory, timeout_s=BUILD_TIMEOUT_S)``: compile in the
  persistent worker, tar export, or ``.so`` export loaded here.

Prints the mean seconds per candidate of each, the ratio and the difference to the baseline of the same mode, and
the worker's start time (paid once per process). Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def candidates(n: int) -> list:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from syno_automl.measure.baseline import conv2d_nchw_te
    from syno_automl.measure.metaschedule import ensure_tensor_intrin

    ensure_tensor_intrin("llvm")
    target = tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": 1})
    mod = tvm.IRModule({"main": conv2d_nchw_te(1, 64, 128, 28, 28, 3)})
    out = []
    for seed in range(n):
        ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", rand_state=seed + 1,
                             num_threads=1)
        spaces = ctx.generate_design_space()
        out.append(ms.builder.BuilderInput(spaces[seed % len(spaces)].mod, target))
    return out


def inproc(bi, in_memory: bool) -> None:
    """The builder before this change, for one candidate."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    rt_mod = tvm.compile(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(bi.mod), target=bi.target).mod
    if not in_memory:
        rt_mod.export_library(os.path.join(tempfile.mkdtemp(prefix="syno_bench_"), "k.tar"), fcompile=tar)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from syno_automl.measure import metaschedule
    from syno_automl.measure.compile_worker import shared_worker

    t = time.perf_counter()
    shared_worker().call(os.getpid, ())
    start_s = time.perf_counter() - t
    inputs = candidates(args.candidates)
    secs: dict[str, list[float]] = {k: [] for k in ("inproc tar", "worker tar", "inproc mem", "worker mem")}
    failures = 0
    for _ in range(args.repeat):
        for bi in inputs:  # interleaved, so that load changes hit every variant alike
            for mem in (False, True):
                tag = "mem" if mem else "tar"
                t = time.perf_counter()
                inproc(bi, mem)
                secs[f"inproc {tag}"].append(time.perf_counter() - t)
                t = time.perf_counter()
                res = metaschedule.InProcessBuilder(mem).build([bi])[0]
                secs[f"worker {tag}"].append(time.perf_counter() - t)
                failures += res.error_msg is not None
        metaschedule._ARTIFACTS.clear()
    print(f"{len(inputs)} candidates x {args.repeat}; worker start {start_s:.2f} s (once per process); "
          f"worker build failures: {failures}")
    for tag in ("tar", "mem"):
        base, new = statistics.mean(secs[f"inproc {tag}"]), statistics.mean(secs[f"worker {tag}"])
        print(f"{tag}: inproc {base:.3f} s/candidate, worker {new:.3f} s/candidate: ratio {new / base:.2f}, "
              f"+{new - base:.3f} s")


if __name__ == "__main__":
    main()
