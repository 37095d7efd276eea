"""The long fuzz run of issue 13: random and mutated inputs (spec strings, OperatorSpace options, mappings and
budgets, sample() arguments, operator JSON), each run in a worker subprocess (tests/_fuzz.py).

Prints inputs tried, crashes, hangs, silently wrong results, silently accepted invalid values and the exception
types seen (those outside the documented ones counted apart). Exit status 1 if any of those counts is not 0.

    python bench/fuzz.py [--inputs 100000] [--seed 0] [--hypothesis 0]

`--hypothesis N` adds N inputs drawn by hypothesis (slower to generate, ~20 ms each) to the seeded random ones.
Run it with a memory cap, e.g. `ulimit -v 6000000; timeout 3600 python bench/fuzz.py`.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import _fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=100_000, help="random inputs (default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hypothesis", type=int, default=0, help="inputs drawn by hypothesis, besides")
    parser.add_argument("--timeout", type=float, default=_fuzz.CASE_TIMEOUT, help="seconds before an input hangs")
    parser.add_argument("--progress", type=int, default=10_000, help="print a line every N inputs")
    args = parser.parse_args()

    runner = _fuzz.Runner(timeout=args.timeout)
    start = time.perf_counter()
    src = _fuzz.RandomSource(random.Random(args.seed))
    try:
        for i in range(args.inputs):
            runner.run(_fuzz.gen_case(src))
            if args.progress and (i + 1) % args.progress == 0:
                t = runner.tally
                print(f"[{time.perf_counter() - start:7.1f}s] {i + 1} inputs, {len(t.crashes)} crashes, "
                      f"{len(t.hangs)} hangs, {len(t.undocumented)} undocumented, {len(t.silent)} silent",
                      flush=True)
        if args.hypothesis:
            from hypothesis import HealthCheck, Phase, given, settings

            @settings(max_examples=args.hypothesis, database=None, deadline=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(_fuzz.cases())
            def drawn(case: dict) -> None:
                runner.run(case)

            drawn()
    finally:
        runner.close()
    t = runner.tally
    print(t.summary())
    print(f"documented types: {', '.join(sorted(_fuzz.DOCUMENTED))}")
    print(f"wall: {time.perf_counter() - start:.1f}s")
    return 1 if (t.crashes or t.hangs or t.wrong or t.silent or t.undocumented) else 0


if __name__ == "__main__":
    sys.exit(main())
