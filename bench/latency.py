"""Tuned latency of cheaper operators on the seven ResNet-34 3x3 layer shapes (the paper's Fig. 9), batch 1.

    PYTHONPATH=. python bench/latency.py [--trials 64] [--target llvm|cuda|rpc:KEY@host:port] [--samples 20]
                                         [--pick flops|untuned] [--operators H1,H2] [--min-ratio 0.1]
                                         [--max-ratio 0.5] [--best 2] [--groups 2,4] [--layers 0,1,...]
                                         [--runner local|inprocess]
                                         [--hang-timeout 1800] [--work-dir DIR] [--quick]

Layers (C_in -> C_out at H x W, 3x3, stride 1, zero padding 1 -- the spec ``[N, C_in, H, W] -> [N, C_out, H, W]``
of the search, so the stage-entry layers 64->128, 128->256, 256->512 are taken at the output resolution):
64x56², 64->128 28², 128x28², 128->256 14², 256x14², 256->512 7², 512x7².

Operators, each compiled from its kernel IR (``syno_automl.codegen.tvm``) and tuned with the SAME MetaSchedule
budget (``--trials`` per kernel, 64 by default) on the same target, timed with ``syno_automl.measure.PROTOCOL``, so
that every speedup compares both sides tuned at the same budget (``--trials 0``: both untuned, labelled so):

* ``conv2d``: the baseline, a TE conv2d NCHW (``measure.conv2d_nchw_te``);
* ``gconv g=2`` / ``gconv g=4`` (``--groups``): ``known.grouped_conv2d`` (weights [g, C_out/g, C_in/g, 3, 3]);
* ``--best`` (2) sampled operators: ``--samples`` operators sampled (seed ``--seed``) from one space over the seven
  layers with FLOPs between ``--min-ratio`` and ``--max-ratio`` of the convolutions' (summed over the layers;
  the floor keeps out degenerate near-zero-FLOPs operators), the two with the fewest FLOPs (``--pick flops``)
  or the fastest untuned on the 128x28² layer (``--pick untuned``).
  Depthwise-separable convolution is two operators (depthwise then pointwise), not one, so it is left out.

Prints a table of latency (ms) and speedup over conv2d per layer, and the geometric-mean speedup of each
operator. Once a layer's kernels are tuned they are timed again together (``--rounds`` 5 interleaved rounds of every
kernel, built once from its best record; speedup = the median of per-round ratios): the table's figures, so that
kernels tuned minutes apart on a shared machine are compared moments apart. The full run (7 layers x 5 kernels x
64 trials) takes hours on 2 shared cores: ``--layers``, ``--groups`` and ``--best`` cut it down. 64 trials leave
kernels short of fully tuned (the baseline conv2d too); the paper-grade setting is 1000+ trials per kernel, and
the database under ``--work-dir`` makes re-runs free.
Nothing is asserted: this prints figures.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from syno_automl import OperatorSpace, known  # noqa: E402
from syno_automl import measure as lat  # noqa: E402

LAYERS = [(64, 64, 56), (64, 128, 28), (128, 128, 28), (128, 256, 14), (256, 256, 14), (256, 512, 7), (512, 512, 7)]
PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]
SPEC = ("[N, C_in, H, W]", "[N, C_out, H, W]")


def layer_name(c_in: int, c_out: int, h: int) -> str:
    return f"{c_in}x{h}²" if c_in == c_out else f"{c_in}->{c_out} {h}²"


def mapping(c_in: int, c_out: int, h: int) -> dict[str, int]:
    return {"N": 1, "C_in": c_in, "C_out": c_out, "H": h, "W": h}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pick_sampled(layers, args, protocol) -> list[tuple[str, object]]:
    maps = [mapping(*layer) for layer in layers]
    conv_space = OperatorSpace(*SPEC, PRIMARY, ["k=3: 2", "s=2: 2"], maps, max_depth=args.depth)
    base = known.conv2d(conv_space).total_flops()
    space = OperatorSpace(*SPEC, PRIMARY, ["k=3: 2", "s=2: 2"], maps, max_depth=args.depth,
                          max_flops=args.max_ratio * base, min_flops=args.min_ratio * base)
    ops = space.sample(args.samples, seed=args.seed, time_limit=120)
    log(f"sampled {len(ops)} operators with FLOPs ratio in [{args.min_ratio}, {args.max_ratio}] "
        f"({space.last_report.stop_reason}, {space.last_report.seconds:.1f} s)")
    if args.operators:  # a pick made once (e.g. by --pick untuned) and kept across runs of the table
        prefixes = [h.strip() for h in args.operators.split(",") if h.strip()]
        chosen = [next((op for op in ops if op.hash.startswith(p)), None) for p in prefixes]
        if None in chosen:
            missing = [p for p, op in zip(prefixes, chosen) if op is None]
            raise SystemExit(f"--operators: {', '.join(missing)} not among the {len(ops)} sampled operators")
    elif args.pick == "untuned":
        probe = next((i for i, layer in enumerate(layers) if layer == (128, 128, 28)), len(layers) // 2)
        scored = []
        for op in ops:
            r = lat.tune_and_time(op.program(probe), args.target, lat.MeasureRequest(trials=0, protocol=protocol))
            scored.append((r.median_ms if r.ok else math.inf, op))
        chosen = [op for _, op in sorted(scored, key=lambda t: t[0])[:args.best]]
    else:
        chosen = sorted(ops, key=lambda op: (op.total_flops(), op.hash))[:args.best]
    out = []
    for op in chosen:
        ratio = op.total_flops() / base
        log(f"  {op.hash}: FLOPs ratio {ratio:.3f}, {int(op.total_params())} params: {' | '.join(op.primitives)}")
        out.append((f"{op.hash[:8]} ({ratio:.2f})", op))
    return out


def paired_times(kernels: dict[str, object], target: str, trials: int, work_dir: str, rounds: int,
                 protocol) -> dict[str, tuple[float, float | None]]:
    """Every kernel of one layer built once (its best record in the tuning database, or TVM's default schedule
    with ``trials`` 0) and timed in interleaved rounds: each round times every kernel with the protocol, a
    kernel's latency is the median of its round medians and its speedup the median over rounds of conv2d's
    round median / its round median. Kernels tuned minutes apart on a shared machine are thus compared moments
    apart (load that comes and goes moves both sides of a ratio). Local targets only; {} for rpc. A kernel that
    cannot be built or timed is left out (the table shows its tuned latency's note instead)."""
    import statistics

    import tvm

    from syno_automl.codegen.tvm import default_gpu_schedule, device_for, make_target
    from syno_automl.measure.database import open_database, records_for
    from syno_automl.measure.kernel import apply_record, to_irmodule
    from syno_automl.measure.metaschedule import ensure_tensor_intrin
    from syno_automl.measure.timing import random_args, time_main

    if target.startswith("rpc:"):
        return {}
    tgt = make_target(target)
    dev = device_for(tgt)
    ensure_tensor_intrin(tgt.kind.name)
    db = open_database(work_dir) if trials > 0 else None
    built = {}
    for name, kernel in kernels.items():
        try:
            mod = to_irmodule(kernel)
            if trials > 0:
                records = records_for(db, mod, tgt)
                if not records:
                    continue
                sched = apply_record(mod, records[0])
            else:
                sched = default_gpu_schedule(mod, tgt) if tgt.kind.name == "cuda" else mod
            built[name] = (tvm.compile(sched, target=tgt).mod, random_args(mod["main"], dev, 0))
        except Exception as exc:  # noqa: BLE001 -- one kernel out of the paired timing, not the table
            log(f"  paired timing: {name} not built ({type(exc).__name__}: {exc})")
    rounds_ms: dict[str, list[float]] = {name: [] for name in built}
    for _ in range(max(1, rounds)):
        for name, (module, args) in built.items():
            rounds_ms[name].append(statistics.median(time_main(module, dev, args, protocol)))
    base = rounds_ms.get("conv2d")
    return {name: (statistics.median(ms), statistics.median(b / m for b, m in zip(base, ms)) if base else None)
            for name, ms in rounds_ms.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=64,
                    help="MetaSchedule trials per kernel, the same for every kernel (default 64; 0: all untuned)")
    ap.add_argument("--groups", default="2,4", help="groups of the grouped convs (default 2,4; '' for none)")
    ap.add_argument("--best", type=int, default=2, help="how many sampled operators to time (default 2)")
    ap.add_argument("--target", default="llvm", help="llvm (default), cuda, rpc:KEY@host:port")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--pick", choices=["flops", "untuned"], default="flops")
    ap.add_argument("--operators", default="",
                    help="comma-separated hash prefixes of sampled operators to time instead of --pick (the same "
                         "--samples/--seed/ratios must sample them)")
    ap.add_argument("--min-ratio", type=float, default=0.1)
    ap.add_argument("--max-ratio", type=float, default=0.5)
    ap.add_argument("--layers", default="", help="comma-separated layer indices 0-6 (default: all)")
    # local by default: a long in-process run segfaulted once in CPython's GC inside a TVM callback (session 4)
    ap.add_argument("--runner", choices=["inprocess", "local"], default="local",
                    help="MetaSchedule runner (local, the default: crash-proof; inprocess: faster per candidate)")
    ap.add_argument("--seconds", type=float, default=None, help="tuning time budget per kernel")
    ap.add_argument("--hang-timeout", type=float, default=1800.0,
                    help="each kernel is tuned in a child process, stopped after this many seconds (soft) and killed "
                         "120 s later (hard): any other hang or crash costs one kernel, not the run (a candidate "
                         "whose LLVM compile never ends is already a failed trial: the builder's per-candidate "
                         "timeout, measure.compile_worker.BUILD_TIMEOUT_S) (default %(default)s; 0: in this "
                         "process)")
    ap.add_argument("--work-dir", default=os.path.join(lat.DEFAULT_WORK_DIR, "bench"))
    ap.add_argument("--rounds", type=int, default=5,
                    help="paired timing: rounds of every kernel of a layer, interleaved, once the layer is tuned "
                         "(default 5; 0: the table shows each kernel's latency timed right after its tuning)")
    ap.add_argument("--quick", action="store_true", help="a shorter timing protocol (repeat 5, min_repeat_ms 10)")
    args = ap.parse_args()

    layers = [LAYERS[int(i)] for i in args.layers.split(",")] if args.layers else list(LAYERS)
    protocol = lat.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=10) if args.quick else lat.PROTOCOL
    t_start = time.time()
    import tvm  # noqa: F401  (import cost out of the first measurement)

    gspace = OperatorSpace(*SPEC, PRIMARY, ["k=3: 2", "g=2: 2"], [mapping(*layer) for layer in layers],
                           max_depth=args.depth)
    gconv = known.grouped_conv2d(gspace)
    sampled = pick_sampled(layers, args, protocol)

    groups = [int(g) for g in args.groups.split(",") if g.strip()]
    columns = ["conv2d"] + [f"gconv g={g}" for g in groups] + [name for name, _ in sampled]
    results: dict[tuple[int, str], lat.Latency] = {}
    paired: dict[int, dict[str, tuple[float, float | None]]] = {}
    for i, (c_in, c_out, h) in enumerate(layers):
        kernels = {"conv2d": lat.conv2d_nchw_te(1, c_in, c_out, h, h, 3)}
        for g in groups:
            kernels[f"gconv g={g}"] = gconv.program({**mapping(c_in, c_out, h), "g": g})
        for name, op in sampled:
            kernels[name] = op.program(i)
        for name, kernel in kernels.items():
            t0 = time.time()
            isolate = args.hang_timeout > 0
            budget = min(args.seconds or args.hang_timeout, args.hang_timeout) if isolate else args.seconds
            request = lat.MeasureRequest(trials=args.trials, seconds=budget, work_dir=args.work_dir,
                                         protocol=protocol, runner=args.runner, isolate=isolate)
            r = lat.tune_and_time(kernel, args.target, request, progress=log,
                                  label=f"{layer_name(c_in, c_out, h)} {name}: ")
            results[i, name] = r
            shown = f"{r.median_ms:.3f} ms" if r.ok else f"missing ({r.note})"
            log(f"[{time.time() - t_start:6.0f} s] {layer_name(c_in, c_out, h):>14} {name:>18}: {shown} "
                f"({time.time() - t0:.0f} s; {r.note})")
        if args.rounds > 0:
            paired[i] = paired_times({n: k for n, k in kernels.items() if results[i, n].ok}, args.target,
                                     args.trials, args.work_dir, args.rounds, protocol)
            log(f"[{time.time() - t_start:6.0f} s] {layer_name(c_in, c_out, h):>14} paired ({args.rounds} rounds): "
                + ", ".join(f"{n} {ms:.3f} ms" + (f" {sp:.2f}x" if sp else "") for n, (ms, sp) in paired[i].items()))

    # the table
    width = 18
    print()
    how = (f"paired: {args.rounds} interleaved rounds per layer, medians" if paired
           else "each kernel timed right after its tuning")
    print(f"Latency on {args.target}, batch 1, {lat.schedules_label(args.trials, args.seconds)} (both sides), "
          f"protocol {protocol}, {how}; ms (speedup over conv2d, {lat.schedules_tag(args.trials)})")
    print(f"{'layer':>14} | " + " | ".join(f"{c:>{width}}" for c in columns))
    print("-" * (17 + (width + 3) * len(columns)))
    speedups: dict[str, list[float]] = {c: [] for c in columns}
    for i, layer in enumerate(layers):
        base = results[i, "conv2d"]
        cells = []
        for c in columns:
            r = results[i, c]
            if not r.ok:
                cells.append(f"{'n/a':>{width}}")
                continue
            if c in paired.get(i, {}):
                ms, sp = paired[i][c]
            else:
                ms, sp = r.median_ms, lat.speedup(base, r)
            if sp is not None:
                speedups[c].append(sp)
            cells.append(f"{ms:>9.3f} ({sp:4.2f}x)" if sp is not None else f"{ms:>{width}.3f}")
        print(f"{layer_name(*layer):>14} | " + " | ".join(f"{cell:>{width}}" for cell in cells))
    print("-" * (17 + (width + 3) * len(columns)))
    geo = []
    for c in columns:
        vals = speedups[c]
        geo.append(f"{math.exp(sum(map(math.log, vals)) / len(vals)):.2f}x" if vals else "n/a")
    print(f"{'geomean':>14} | " + " | ".join(f"{g:>{width}}" for g in geo))
    print(f"\ntotal wall time {time.time() - t_start:.0f} s; tuning records in {args.work_dir}")
    missing = [(layer_name(*layers[i]), c, r.note) for (i, c), r in results.items() if not r.ok]
    for name, c, note in missing:
        print(f"missing: {name} {c}: {note}")


if __name__ == "__main__":
    main()
