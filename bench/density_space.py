"""Density benchmark (issue 25), the space side: where draws land in FLOPs and where the good operators are.

On the default task's space (``syno-automl search``'s: small CNN on digits, FLOPs budget 0.5x, cost budget 1.0x):
  * draws: N operators from ``space.sample`` for each (priors, FLOPs bins) setting asked, printed as the share of
    draws per FLOPs-ratio bin (FLOPs summed over the placeholders / the replaced convs' FLOPs) and the share under
    0.1x;
  * priors: each prior alone, the default ones together and all of them, as filters on the measured file's
    operators (replayed in the space): how many of them, of the good ones (within 1 pp of the baseline at 6
    epochs) and of the collapsed ones (under 20 % accuracy at 3 epochs) each keeps;
  * data: the operators of a measured file (default ../shared/data/default_space_accuracy.jsonl, described in the
    README beside it) replayed in the space, per FLOPs-ratio bin: how many, how many within 1 pp / 3 pp of the
    baseline at the final length (6 epochs) and their density, with the priors off (every row) and on (the rows
    no default prior rejects: syno_automl.priors).

The training side (each drawn operator trained at the trial's and the final stage's length, Spearman of the two)
plugs in through ``evaluate``: it gets the drawn operators and returns their accuracies per length; until it does,
the draws are reported by FLOPs only.

    PYTHONPATH=. python bench/density_space.py                      # 600 draws per setting, seed 0
    PYTHONPATH=. python bench/density_space.py --draws 200 --settings off:0,on:5
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

from syno_automl import priors as P  # noqa: E402
from syno_automl.space import Operator, OperatorSpace  # noqa: E402

#: FLOPs-ratio bin edges (the last bin runs to the budget)
EDGES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35)
#: the measured file: ../shared/data/ beside the repository (found upwards, so a git worktree finds it too)
DATA = next((p / "shared" / "data" / "default_space_accuracy.jsonl" for p in Path(__file__).resolve().parents
             if (p / "shared" / "data" / "default_space_accuracy.jsonl").exists()),
            Path("default_space_accuracy.jsonl"))
#: accuracies per length for the drawn operators: {epochs: [accuracy per operator]} (the training side)
Evaluate = Callable[[Sequence[Operator]], dict[int, list[float]]]


def default_space(priors: bool) -> tuple[OperatorSpace, float]:
    """(the default search's space with the default priors on or off, the replaced convs' FLOPs summed)."""
    from syno_automl.config import SearchConfig
    from syno_automl.study import prepare

    context = prepare(SearchConfig(tracking_uri=None))
    config = context.space.config()
    if not priors:  # the same space without any prior (substitute(priors=False) builds exactly this)
        for key in ("prior_weight_io", "prior_outer_kinds", "prior_max_outer", "prior_lowrank_size",
                    "prior_max_pooling", "channel_inputs", "min_flops"):
            config.pop(key, None)
    return OperatorSpace(**config), float(context.substitution.baseline_flops)


def bin_of(ratio: float) -> int:
    return max(i for i, edge in enumerate(EDGES) if ratio >= edge)


def bin_label(i: int) -> str:
    hi = f"{EDGES[i + 1]:g}x" if i + 1 < len(EDGES) else "budget"
    return f"[{EDGES[i]:g}x, {hi})"


def draw(space: OperatorSpace, baseline: float, count: int, seed: int, flops_bins: int) -> tuple[list[float], float]:
    """FLOPs ratios of `count` operators drawn from `space` (and the seconds it took)."""
    started = time.time()
    ops = space.sample(count, seed=seed, flops_bins=flops_bins, time_limit=3600.0)
    return [op.total_flops() / baseline for op in ops], time.time() - started


def histogram(ratios: Sequence[float]) -> list[float]:
    """Share of `ratios` per bin of EDGES."""
    counts = [0] * len(EDGES)
    for r in ratios:
        counts[bin_of(r)] += 1
    return [c / max(1, len(ratios)) for c in counts]


def data_density(path: Path, space: OperatorSpace, baseline: float) -> list[dict[str, Any]]:
    """Per FLOPs bin of the data file's operators: count and within-1-pp / 3-pp counts at 6 epochs, priors off
    (every row) and on (rows that no prior of `space` rejects)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    base = statistics.mean(r["val_acc"] for r in rows if r["role"] == "baseline" and r.get("epochs") == 6)
    final = {r["hash"]: r["val_acc"] for r in rows if r["role"] == "sample" and r.get("epochs") == 6}
    table = [{"off": [0, 0, 0], "on": [0, 0, 0]} for _ in EDGES]
    for r in (r for r in rows if r["role"] == "sample" and r.get("epochs") is None):
        op = Operator.from_json(space, r["json"])
        acc = final.get(r["hash"], 0.0)  # not re-trained: more than 20 pp behind at 3 epochs
        hit = [1, int(acc >= base - 0.01), int(acc >= base - 0.03)]
        cells = ["off"] + ([] if P.violations(op) else ["on"])
        for cell in cells:
            row = table[bin_of(r["flops_ratio"])][cell]
            for i in range(3):
                row[i] += hit[i]
    return table


#: each prior's rule name in the space's stats (native/rules.cpp)
RULES = {"weight_io": "weight-shares-input-and-output", "outer_kinds": "outer-kind",
         "outer_product": "outer-product-limit", "low_rank": "low-rank-size", "pooling": "unweighted-pooling-limit",
         "flops_floor": "flops-floor", "channel_twins": "channel-split-order"}


def prior_table(path: Path) -> list[str]:
    """Per prior (and together): what it keeps of the data file's operators, its good ones and collapsed ones."""
    from syno_automl.config import SearchConfig
    from syno_automl.study import prepare

    config = prepare(SearchConfig(tracking_uri=None)).space.config()
    config["prior_outer_kinds"] = True  # every prior set, so that each can be judged
    space = OperatorSpace(**config)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    base = statistics.mean(r["val_acc"] for r in rows if r["role"] == "baseline" and r.get("epochs") == 6)
    good = {r["hash"] for r in rows if r["role"] == "sample" and r.get("epochs") == 6 and r["val_acc"] >= base - 0.01}
    samples = [r for r in rows if r["role"] == "sample" and r.get("epochs") is None]
    collapsed = {r["hash"] for r in samples if (r["val_acc"] or 0) < 0.2}
    broken = {r["hash"]: set(P.violations(Operator.from_json(space, r["json"]))) for r in samples}
    lines = [f"{len(samples)} operators, {len(good)} good, {len(collapsed)} collapsed"]
    settings = [(name, {RULES[name]}) for name in P.PRIORS]
    settings += [("(a)+(b)+(c) of the issue",
                  {RULES[n] for n in ("weight_io", "outer_product", "low_rank", "pooling")}),
                 ("DEFAULT_PRIORS", {RULES[n] for n in P.DEFAULT_PRIORS}), ("all", set(RULES.values()))]
    for label, rules in settings:
        kept = {h for h, b in broken.items() if not b & rules}
        lines.append(f"  {label:26s} keeps {len(kept):3d}/{len(samples)}, good {len(kept & good):2d}/{len(good)}, "
                     f"collapsed {len(kept & collapsed):3d}/{len(collapsed)}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", default="off:0,off:5,on:0,on:5",
                    help="comma-separated priors:flops_bins settings to draw from (priors on|off)")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    if args.data.exists():
        print("\n".join(prior_table(args.data)) + "\n", flush=True)
    spaces = {p: default_space(p == "on") for p in ("off", "on")}
    print("FLOPs-ratio bins: " + "  ".join(bin_label(i) for i in range(len(EDGES))))
    for setting in filter(None, args.settings.split(",")):
        priors, bins = setting.split(":")
        space, baseline = spaces[priors]
        ratios, seconds = draw(space, baseline, args.draws, args.seed, int(bins))
        shares = "  ".join(f"{100 * s:5.1f}%" for s in histogram(ratios))
        under = sum(r < 0.1 for r in ratios) / max(1, len(ratios))
        print(f"priors {priors:3s} bins {bins}: {len(ratios)} draws in {seconds:.0f} s | {shares} | "
              f"< 0.1x: {100 * under:.0f}%  median {statistics.median(ratios):.3f}x", flush=True)
    if args.data.exists():
        space, baseline = spaces["on"]
        print(f"\n{args.data.name}: per FLOPs bin, operators / within 1 pp / within 3 pp at 6 epochs")
        total = {"off": [0, 0, 0], "on": [0, 0, 0]}
        for i, cell in enumerate(data_density(args.data, space, baseline)):
            text = []
            for key in ("off", "on"):
                n, one, three = cell[key]
                total[key] = [a + b for a, b in zip(total[key], cell[key])]
                text.append(f"priors {key}: {n:3d} / {one:2d} / {three:2d} "
                            f"({100 * one / n if n else 0:4.1f}% within 1 pp)")
            print(f"  {bin_label(i):16s} " + " | ".join(text))
        for key in ("off", "on"):
            n, one, three = total[key]
            print(f"  all, priors {key}: {n} operators, {one} within 1 pp ({100 * one / max(1, n):.1f}%), {three} "
                  f"within 3 pp")


if __name__ == "__main__":
    main()
