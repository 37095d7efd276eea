"""What do the planner's weight views save? (issue 10 point 2, figures only)

    PYTHONPATH=. python bench/plan_views.py [--count 60] [--seed 0] [--repeats 5] [--threads 1] [--budget on|off]
                                            [--sample-time 200]

Samples operators from the space ``syno-automl search`` builds by default (bench/cost.py's ``default_space``), and
for every placeholder program where the planner moved views onto a weight (``program["weights"][k]["views"]``)
times one forward + backward of the generated module against the module of the same program with those views
put back on the data tensor right after the weight's contraction (the plan without point 2 of native/plan.hpp:
the views' inverse applied to the contraction's ``out``). Both modules run in the same process, interleaved, on
the placeholder's input shape; ratio = planned / unplanned step (least of ``--repeats`` each: load only adds).
Programs whose weights the planner multiplies together (point 3) are left out (bench/cost.py covers them). Printed
per program and as p50 / min / max. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost import default_space  # noqa: E402

from syno_automl.codegen.torch import build_module  # noqa: E402
from syno_automl.ir import STEP_OPS, StepBackend, parse, walk  # noqa: E402


def _viewed(weight: dict) -> list[int]:
    dims = list(weight["dims"])
    for v in weight.get("views", []):
        if v["op"] in ("split", "unfold"):
            i = dims.index(v["src"])
            dims[i:i + 1] = list(v["dst"])
        elif v["op"] == "merge":
            dims.remove(v["src"][1])
            dims[dims.index(v["src"][0])] = v["dst"]
        else:
            dims[dims.index(v["src"])] = v["dst"]
    return dims


class _TDims(StepBackend):
    """T's dims (renamed) at each contract step."""

    def __init__(self) -> None:
        self.at: dict[int, tuple[int, ...]] = {}

    def contract(self, tr) -> None:
        self.at[tr.index] = tr.contract.renamed.dims

    STEPS = {op: (lambda self, tr: None) for op in STEP_OPS} | {"contract": contract}


def unplanned(program: dict) -> dict:
    """The program with every weight's views put back on T right after its contraction, in the lowering's
    canonical layout (the contraction's out: T's dims, then the parameter's dims T lacks, in its order)."""
    p = copy.deepcopy(program)
    t_dims = _TDims()
    walk(parse(program), t_dims)
    steps = []
    for i, st in enumerate(p["steps"]):
        steps.append(st)
        if st["op"] != "contract":
            continue
        w = p["weights"][st["weight"]]
        viewed, param, t = set(_viewed(w)), list(w["dims"]), set(t_dims.at[i])
        views = w.pop("views", [])
        st["out"] = ([d for d in st["out"] if d in t] +
                     [d for d in param if d not in t and (d in st["out"] or d not in viewed)])
        steps += views
    p["steps"] = steps
    p.pop("cost", None)
    return p


def step_seconds(module: torch.nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    module(x).square().mean().backward()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", choices=["on", "off"], default="on")
    ap.add_argument("--sample-time", type=float, default=200.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sub, _ = default_space(1.0 if args.budget == "on" else None)
    ops = sub.space.sample(args.count, seed=args.seed, threads=1, time_limit=args.sample_time)
    ratios = []
    with_views = 0
    for op in ops:
        for k in range(len(sub.placeholders)):
            mapping = sub.mapping_for(op, k)
            program = op.program(mapping)
            views = [v["op"] for w in program["weights"] for v in w.get("views", [])]
            if not views or "contract" in views:  # products of weights (plan.hpp point 3): not undone here
                continue
            with_views += 1
            planned, plain = build_module(program), build_module(unplanned(program))
            x = torch.randn(program["input"]["shape"])
            step_seconds(planned, x), step_seconds(plain, x)  # warm-up
            a, b = [], []
            for _ in range(args.repeats):  # interleaved: load drifts hit both
                a.append(step_seconds(planned, x))
                b.append(step_seconds(plain, x))
            ratio = min(a) / min(b)  # the least time of each: load spikes only add
            ratios.append(ratio)
            print(f"  {op.hash} placeholder {k}: planned/unplanned step {ratio:5.2f}x  "
                  f"({min(a) * 1e3:.2f} ms vs {min(b) * 1e3:.2f} ms)  "
                  f"views {[[v['op'] for v in w.get('views', [])] for w in program['weights']]}", flush=True)
    print(f"\n{len(ops)} operators sampled (budget {args.budget}, seed {args.seed}); {with_views} placeholder programs "
          f"with weight views")
    if ratios:
        ratios.sort()
        print(f"planned / unplanned step (forward + backward, {args.threads} thread(s)): p50 "
              f"{statistics.median(ratios):.2f}x  min {ratios[0]:.2f}x  max {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
