"""Synthesis throughput on the conv2d spec of a ResNet-18 3x3 layer (C_in=C_out=64, H=W=32, k=3, s=2).

Prints, for depth 8 and 10: random trials (descents) per second and distinct valid operators per core-second
on 1 and 2 threads; the canonical-rate table by pGraph size; the shape-distance ablation (trials per valid
operator with and without it). Each measurement uses a fresh space (no memo carried over).

    python bench/synthesis.py [--seconds 10]
"""
from __future__ import annotations

import argparse
import time

from syno_automl import OperatorSpace

SPEC = dict(input_shape="[N, C_in, H, W]", output_shape="[N, C_out, H, W]",
            primary=["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"], coefficients=["k=3: 2", "s=2: 2"],
            mappings=[{"N": 32, "C_in": 64, "C_out": 64, "H": 32, "W": 32}])


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
    args = parser.parse_args()

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
    print(f"  ops/s without / with = {ratio:.3f}")


if __name__ == "__main__":
    main()
