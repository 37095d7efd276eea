"""Does an operator inside the cost budget run about as fast as its budget says? (issue 10, figures only)

    PYTHONPATH=. python bench/cost.py [--default 30] [--resnet 30] [--seed 0] [--repeats 3] [--threads 1]
                                      [--budget on|off|both] [--cost-ratio 1.0] [--min-flops-ratio R]
                                      [--sample-time 300]

Two operator spaces, each sampled twice: with the cost budget on (``cost_ratio``, the default search's setting)
and off (only the default FLOPs budget, ``flops_ratio=0.5``):

* ``default``: the space ``syno-automl search`` builds by default (``study.prepare``: the small CNN on digits,
  its two 3x3 convolutions after the stem substituted), batch 64;
* ``resnet``: one ResNet-18 3x3 layer, 64 -> 64 channels at 32x32, batch 32.

For every operator: one training step (forward + ``backward``) of the substituted model, timed on ``--threads``
torch threads (median of ``--repeats`` after one warm-up step; a step over 20x the baseline's is timed once),
against the original model's step, measured in the same run (its median over measurements spread through the
run, so machine load drifts hit both sides); the activation memory kept for backward (bytes of the distinct
tensors saved by autograd, ``saved_tensors_hooks``), against the baseline's. Printed per space and budget: the
step-time ratio's p50 / p90 / max and how many operators exceed 2x, the activation-memory ratio, and the Spearman
rank correlation between the planned cost (``Operator.cost``, summed over the placeholders) and the measured step
time, and the FLOPs ratio's p50. ``--min-flops-ratio R`` samples the same spaces with a FLOPs floor too (R times
the replaced layers' FLOPs); ``--sample-time`` caps each space's sampling (one thread). Nothing is asserted.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from scipy.stats import spearmanr
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from syno_automl import OperatorSpace  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.placeholder import Substitution, substitute  # noqa: E402
from syno_automl.study import prepare  # noqa: E402

SLOW = 20.0  # a step this many times the baseline's is timed once


def default_space(cost_ratio: float | None) -> tuple[Substitution, torch.Tensor]:
    """What `syno-automl search` builds by default (SearchConfig defaults), with the cost budget given."""
    context = prepare(SearchConfig(tracking_uri=None, cost_ratio=cost_ratio))
    return context.substitution, context.example


def resnet_space(cost_ratio: float | None, seed: int) -> tuple[Substitution, torch.Tensor]:
    """One ResNet-18 3x3 layer (64 channels, 32x32), batch 32, with the default search's FLOPs budget."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, bias=False))
    example = torch.randn(32, 64, 32, 32)
    sub = substitute(model, nn.Conv2d, example, flops_ratio=SearchConfig.flops_ratio, cost_ratio=cost_ratio,
                     seed=seed, check=False)  # a budget sweep: the tightest may hold nothing, which is measured
    return sub, example


def loss_of(out: Any) -> torch.Tensor:
    return out.float().square().mean() if isinstance(out, torch.Tensor) else out[0].float().square().mean()


def step_seconds(model: nn.Module, x: torch.Tensor, repeats: int, baseline: float | None) -> float:
    times = []
    for i in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss_of(model(x)).backward()
        times.append(time.perf_counter() - t0)
        if i == 0 and baseline is not None and times[0] > SLOW * baseline:
            return times[0]
    return statistics.median(times[1:])


def saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct tensors autograd keeps for backward (activation memory of a training step)."""
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta":
            storage = t.untyped_storage()
            seen[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return t

    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model(x))
    loss.backward()
    return sum(seen.values())


def measure(name: str, sub: Substitution, x: torch.Tensor, count: int, seed: int, repeats: int,
            sample_time: float, min_flops_ratio: float | None) -> list[dict]:
    model = sub.model
    model.train()
    space = sub.space
    if min_flops_ratio is not None:  # the same space with a FLOPs floor (its operators apply to `sub` as they are)
        space = OperatorSpace(**{**space.config(), "min_flops": min_flops_ratio * sub.baseline_flops}, threads=1)
    ops = space.sample(count, seed=seed, threads=1, time_limit=sample_time)
    report = space.last_report
    print(f"  {name}: sampled {len(ops)} operators in {report.seconds:.1f} s ({report.attempts} descents, "
          f"stopped by {report.stop_reason})", flush=True)
    base_times: list[float] = []

    def baseline() -> float:
        sub.reset()
        base_times.append(step_seconds(model, x, repeats, None))
        return statistics.median(base_times)

    base = baseline()
    base_mem = saved_bytes(model, x)
    rows = []
    for i, op in enumerate(ops):
        if i and i % 10 == 0:
            base = baseline()
        costs = [op.cost(sub.mapping_for(op, k)) for k in range(len(sub.placeholders))]
        row = {"space": name, "hash": op.hash, "cost": sum(c["total"] for c in costs),
               "cost_ratio": sub.cost_ratio(op), "flops_ratio": sub.flops_ratio(op),
               "materialized": sum(c["materialized"] for c in costs), "peak": max(c["peak"] for c in costs)}
        try:
            sub.apply(op)
            row["seconds"] = step_seconds(model, x, repeats, base)
            row["memory"] = saved_bytes(model, x)
        except (RuntimeError, MemoryError) as e:  # e.g. out of memory under `ulimit -v`: reported, not timed
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
        rows.append(row)
        shown = (f"{row['seconds'] / base:7.2f}x  mem {row['memory'] / base_mem:6.2f}x" if "seconds" in row
                 else row["error"])
        print(f"  {name:7s} {op.hash}  cost {row['cost_ratio']:6.2f}x  flops {row['flops_ratio']:5.2f}x  "
              f"step {shown}", flush=True)
    base = baseline()
    for row in rows:
        if "seconds" in row:
            row["ratio"] = row["seconds"] / base
            row["memory_ratio"] = row["memory"] / base_mem
    print(f"  {name}: baseline step {base * 1e3:.1f} ms (median of {len(base_times)} measurements), activations "
          f"{base_mem / 2**20:.1f} MiB; {len(ops)} operators sampled ({report.stop_reason})",
          flush=True)
    return rows


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summarize(label: str, rows: list[dict]) -> None:
    timed = [r for r in rows if "ratio" in r]
    if not timed:
        print(f"{label}: no operator timed")
        return
    ratios = [r["ratio"] for r in timed]
    mem = [r["memory_ratio"] for r in timed]
    # ranks of cost_ratio / step ratio: within one space those of cost / seconds; across spaces, normalized
    rho = spearmanr([r["cost_ratio"] for r in timed], ratios).statistic if len(timed) > 2 else float("nan")
    print(f"{label}: n={len(timed)} (+{len(rows) - len(timed)} failed)  step ratio p50 {quantile(ratios, .5):.2f}x "
          f"p90 {quantile(ratios, .9):.2f}x max {max(ratios):.2f}x, >2x: {sum(r > 2 for r in ratios)}; "
          f"activations p50 {quantile(mem, .5):.2f}x max {max(mem):.2f}x; FLOPs p50 "
          f"{quantile([r['flops_ratio'] for r in timed], .5):.3f}x; Spearman(cost, time) {rho:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--default", type=int, default=30, help="operators from the default search space")
    ap.add_argument("--resnet", type=int, default=30, help="operators from the ResNet-18 3x3 layer space")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", choices=("on", "off", "both"), default="both")
    ap.add_argument("--min-flops-ratio", type=float, default=None,
                    help="also bound FLOPs from below, relative to the replaced layers' (default: none)")
    ap.add_argument("--sample-time", type=float, default=300.0, help="seconds allowed to sample each space")
    ap.add_argument("--cost-ratio", type=float, default=SearchConfig.cost_ratio or 1.0,
                    help="the cost budget when on (default: the search's, %(default)s)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    budgets = {"on": [args.cost_ratio], "off": [None], "both": [args.cost_ratio, None]}[args.budget]
    results: list[tuple[str, list[dict]]] = []
    for ratio in budgets:
        tag = f"cost budget {ratio}x" if ratio else "cost budget off"
        if args.min_flops_ratio is not None:
            tag += f", FLOPs >= {args.min_flops_ratio}x"
        for name, count in (("default", args.default), ("resnet", args.resnet)):
            if count <= 0:
                continue
            print(f"== {name}, {tag}", flush=True)
            sub, x = default_space(ratio) if name == "default" else resnet_space(ratio, args.seed)
            results.append((f"{name:7s} {tag}", measure(name, sub, x, count, args.seed, args.repeats, args.sample_time,
                                                         args.min_flops_ratio)))
    print(f"\nsummary ({args.threads} thread(s), seed {args.seed}; ratios against the unsubstituted model's step)")
    for label, rows in results:
        summarize(label, rows)
    off = [r for label, rows in results if "off" in label for r in rows]
    if off:
        summarize("all     cost budget off", off)


if __name__ == "__main__":
    main()
