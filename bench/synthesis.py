"""Synthesis throughput on the conv2d spec of a ResNet-18 3x3 layer (C_in=C_out=64, H=W=32, k=3, s=2).

Prints, for depth 8 and 10: random trials (descents) per second and distinct valid operators per core-second
on 1 and 2 threads; the canonical-rate table by pGraph size; the shape-distance ablation (trials per valid
operator with and without it); peak memory (ru_maxrss of a child process, under a 6 GB address-space limit) of
enumerating and sampling the original's ResNet-18 search options at depth 7 (issue 15). Each measurement uses a
fresh space (no memo carried over).

    python bench/synthesis.py [--seconds 10] [--memory-nodes 2000000] [--memory-only]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from syno_automl import OperatorSpace

SPEC = dict(input_shape="[N, C_in, H, W]", output_shape="[N, C_out, H, W]",
            primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], coefficients=["k=3: 2", "s=2: 2"],
            mappings=[{"N": 32, "C_in": 64, "C_out": 64, "H": 32, "W": 32}])


# The original's ResNet-18 options (issue 15), STRIDE forbidden: the memory cases.
MEMORY_SPEC = dict(input_shape="[N, C_in: unordered, H, W]", output_shape="[N, C_out: unordered, H, W]",
                   primary=["N: 0", "C_in: 2", "C_out: 4", "H: 2", "W: 2"], coefficients=["k=3: 2", "s=2: 2"],
                   mappings=[{"N": 32, "C_in": 64, "C_out": 64, "H": 32, "W": 32}], max_depth=7, max_weights=2,
                   max_reductions=5, min_unfold_ratio=2.3, min_weight_params=100, max_size_variables=3,
                   max_coefficient_degree=2,
                   max_counts={"MERGE": 1, "SPLIT": 3, "SHIFT": 2, "STRIDE": 0, "EXPAND": 0})
ADDRESS_LIMIT = 6 * 2**30


def memory_child(case: str, nodes: int, seconds: float) -> None:
    """Runs one memory case in this (child) process and prints its result and peak RSS as JSON."""
    space = OperatorSpace(**MEMORY_SPEC, threads=1)
    if case == "enumerate":
        e = space.enumerate(7, max_nodes=nodes, time_limit=seconds, max_operators=1000)
        out = {"operators": e.operator_count, "nodes": sum(e.nodes_per_depth), "stop": e.stop_reason}
    else:
        ops = space.sample(1000, seed=0, threads=1, time_limit=seconds)
        out = {"operators": len(ops), "attempts": space.last_report.attempts, "stop": space.last_report.stop_reason}
    stats = space.stats()
    out["dims"] = stats["dims_interned"]          # alive at the end (walks free theirs)
    out["dims_created"] = stats.get("dims_created")
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def peak_memory(case: str, nodes: int, seconds: float) -> dict:
    """One case in a fresh child process (a parent's peak would mix cases), its address space capped."""
    def cap() -> None:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        limit = ADDRESS_LIMIT if hard == resource.RLIM_INFINITY else min(ADDRESS_LIMIT, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    proc = subprocess.run([sys.executable, __file__, "--memory-child", case, "--memory-nodes", str(nodes),
                           "--seconds", str(seconds)], capture_output=True, text=True, preexec_fn=cap)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_memory(nodes: int, seconds: float) -> None:
    print("peak memory, issue-15 spec (STRIDE: 0) at depth 7, 1 thread, child processes capped at 6 GB")
    for case in ("enumerate", "sample"):
        m = peak_memory(case, nodes, seconds)
        print(f"  {case:>9}: {json.dumps(m)}")


def measure(depth: int, threads: int, seconds: float, **options) -> dict:
    space = OperatorSpace(**SPEC, max_depth=depth, **options)
    start = time.perf_counter()
    ops = space.sample(1_000_000, seed=0, threads=threads, time_limit=seconds, max_attempts=10**9)
    wall = time.perf_counter() - start
    report = space.last_report
    return {"space": space, "ops": len(ops), "attempts": report.attempts, "wall": wall,
            "trials_per_s": report.attempts / wall, "ops_per_core_s": len(ops) / (wall * threads),
            "trials_per_op": report.attempts / max(1, len(ops))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="wall seconds per measurement")
    parser.add_argument("--memory-nodes", type=int, default=2_000_000, help="node limit of the enumeration case")
    parser.add_argument("--memory-only", action="store_true", help="only the peak-memory cases")
    parser.add_argument("--memory-child", choices=["enumerate", "sample"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.memory_nodes, 60 * args.seconds)
        return
    if args.memory_only:
        print_memory(args.memory_nodes, args.seconds)
        return

    print(f"conv2d spec, ResNet-18 3x3 layer (C=64, 32x32, k=3, s=2), {args.seconds:g} s per measurement\n")
    print(f"{'depth':>5} {'threads':>7} {'trials/s':>9} {'distinct ops':>12} {'ops/core-s':>10} {'in 10 core-s':>12}")
    tables = {}
    for depth in (8, 10):
        for threads in (1, 2):
            m = measure(depth, threads, args.seconds)
            tables.setdefault(depth, m["space"])
            print(f"{depth:>5} {threads:>7} {m['trials_per_s']:>9.1f} {m['ops']:>12} {m['ops_per_core_s']:>10.1f} "
                  f"{m['ops_per_core_s'] * 10:>12.0f}")

    for depth, space in tables.items():
        print(f"\ncanonical rate by pGraph size (depth {depth}, 1-thread run): candidates that pass every rule")
        print(f"{'size':>4} {'candidates':>11} {'canonical':>10} {'rate':>7} {'pruned by distance/budget':>26}")
        for d in space.stats()["depths"]:
            print(f"{d['depth'] + 1:>4} {d['candidates']:>11} {d['canonical']:>10} {d['canonical_rate']:>7.3f} "
                  f"{d['pruned']:>26}")

    print("\nshape-distance ablation (1 thread, depth 8): trials per valid operator")
    on = measure(8, 1, args.seconds)
    off = measure(8, 1, args.seconds, distance_pruning=False)
    print(f"  with distance:    {on['trials_per_op']:8.2f} trials/op, {on['ops']:5d} ops")
    print(f"  without distance: {off['trials_per_op']:8.2f} trials/op, {off['ops']:5d} ops")
    ratio = (off["ops"] / off["wall"]) / max(1e-9, on["ops"] / on["wall"])
    print(f"  ops/s without / with = {ratio:.3f}\n")
    print_memory(args.memory_nodes, args.seconds)


if __name__ == "__main__":
    main()
