"""Does the planned cost rank speed on a GPU target? (issue 24, figures only; nothing is asserted)

    PYTHONPATH=. python bench/gpu_cost.py --offline [--data ../shared/data/gpu_step_times_h200.json]
    PYTHONPATH=. python bench/gpu_cost.py --fit            # the cuda.eager coefficients from that data
    PYTHONPATH=. python bench/gpu_cost.py --gpu [--operators 24] [--seed 0]

``--offline`` replays every row of the shared H200 data (ResNet-18 for CIFAR, batch 128, 13 3x3 convs
substituted; ../shared/data/README.md) and prints, per shipped profile, Spearman(predicted cost summed over the 13
layers, measured whole-model train_fp32 step) over all rows and over the rows inside the data's cost budget, and
how many rows the profile's own budget (cost_ratio <= 1) keeps with their measured step-time ratios.

``--fit`` fits the cuda.eager coefficients to that data: whole-model time = rest + the 13 layers' predicted cost,
``rest`` being the baseline's time less its 13 convolutions' predicted cost; least squares of log(ratio) with the
FLOP coefficient held at or above H200's dense TF32 peak (3 x 2 FLOPs per multiply-add, forward + backward).

``--gpu`` (needs CUDA; skipped with a message otherwise) samples operators from that space with the budget off
and on (per target), times each substituted model against the baseline model in the same run -- eager training
step (cuda.eager) and compiled inference (cuda.compiled) -- and prints the same figures per target.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from syno_automl import Operator, OperatorSpace  # noqa: E402
from syno_automl.calibrate import features  # noqa: E402
from syno_automl.cost_profile import SHIPPED, CostProfile, resolve  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
DATA = next((p for p in (_ROOT / "shared", _ROOT.parent / "shared", _ROOT.parent.parent / "shared")
             if (p / "data" / "gpu_step_times_h200.json").is_file()), _ROOT.parent / "shared") \
    / "data" / "gpu_step_times_h200.json"
H200_TF32_FLOPS = 494.7e12  # dense TF32 peak, FLOP/s


def data_space(data: dict) -> OperatorSpace:
    sig = json.loads(data["rows"][0]["json"])["space"]
    return OperatorSpace(sig["input_shape"], sig["output_shape"], sig["primary"], sig["coefficients"],
                         data["mappings"])


def conv_counts(mappings: list[dict]) -> list[dict[str, float]]:
    """Each replaced conv's counts as the conv-equivalent operator's plan has them (CostProfile.layer_cost)."""
    out = []
    for m in mappings:
        inp, outp = m["N"] * m["C_in"] * m["H"] * m["W"], m["N"] * m["C_out"] * m["H"] * m["W"]
        w = m["C_out"] * m["C_in"] * m["k"] ** 2
        out.append({"flops": 2.0 * outp * m["C_in"] * m["k"] ** 2, "input": inp, "output": outp, "weight": w})
    return out


def replay(data: dict) -> tuple[list[list[dict]], list[dict]]:
    space = data_space(data)
    counts = []
    for row in data["rows"]:
        op = Operator.from_json(space, row["json"])
        counts.append([op.cost(i) for i in range(space.num_mappings)])
    return counts, conv_counts(data["mappings"])


def cost_ratio(profile: CostProfile, layers: list[dict], convs: list[dict]) -> float:
    op = sum(profile.total(c) for c in layers)
    base = sum(profile.layer_cost(c["flops"], c["input"], c["output"], c["weight"]) for c in convs)
    return op / base


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def offline(path: Path, metric: str) -> None:
    data = json.loads(path.read_text())
    counts, convs = replay(data)
    ratio = np.array([r["ratio"][metric] for r in data["rows"]])
    inside = np.array([r["budget"] == "on" for r in data["rows"]])
    print(f"{path.name}: {len(ratio)} rows ({inside.sum()} inside the data's cost budget), {data['device']}, "
          f"torch {data['torch']}; measured: {metric} ratio to the baseline model in the same run")
    for name in SHIPPED:
        profile = resolve(name)
        ratios = np.array([cost_ratio(profile, layers, convs) for layers in counts])
        rho_all = spearmanr(ratios, ratio).statistic
        rho_in = spearmanr(ratios[inside], ratio[inside]).statistic
        kept = ratios <= 1.0
        kept_ratios = list(ratio[kept])
        print(f"  {name:14s} Spearman(cost, {metric}) all {rho_all:.3f}, inside the data's budget {rho_in:.3f}; "
              f"its own budget (cost_ratio <= 1) keeps {kept.sum()} rows: measured p50 "
              f"{quantile(kept_ratios, .5):.2f}x "
              f"p90 {quantile(kept_ratios, .9):.2f}x")


def fit(path: Path, metric: str) -> None:
    from scipy.optimize import least_squares

    data = json.loads(path.read_text())
    counts, convs = replay(data)
    y = np.array([r["ratio"][metric] for r in data["rows"]])
    base_ms = float(np.mean([r["baseline_ms"][metric] for r in data["rows"]]))
    x = np.array([np.sum([features(c, False) for c in layers], axis=0) for layers in counts])
    xb = np.array([sum(c["flops"] for c in convs), sum(c["output"] + c["weight"] for c in convs),
                   sum(c["input"] + c["weight"] for c in convs), 2.0 * len(convs)])
    floor = np.array([3e3 / H200_TF32_FLOPS, 0, 0, 0])  # ms per forward FLOP: at least at peak, fwd + bwd

    def predict(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        c = floor + np.exp(p)
        conv = float(xb @ c)
        rest = max(base_ms - conv, 0.0)
        return (rest + x @ c) / (rest + conv), c, rest

    best = min((least_squares(lambda p: np.log(predict(p)[0] / y), np.log(x0)) for x0 in
                ([1e-12, 1e-8, 1e-9, 1e-3], [1e-13, 1e-9, 1e-8, 1e-2], [1e-11, 1e-10, 1e-10, 5e-3])),
               key=lambda s: s.cost)
    ratios, c, rest = predict(best.x)
    ns = c * 1e6  # ms -> ns
    print(f"fitted on {len(y)} rows of {path.name} ({metric}); model rest {rest:.2f} ms of {base_ms:.2f} ms")
    print(json.dumps({"flop": ns[0], "element": ns[1], "read": ns[2], "launch": ns[3]}, indent=1))
    print(f"rms log error {np.sqrt(np.mean(np.log(ratios / y) ** 2)):.3f}; Spearman(cost, {metric}) "
          f"{spearmanr(x @ c, y).statistic:.3f}")


def gpu(count: int, seed: int) -> None:
    import torch

    if not torch.cuda.is_available():
        print("bench/gpu_cost.py --gpu: no CUDA device (torch.cuda.is_available() is False): skipped. "
              "Run it on a GPU machine; --offline evaluates the shipped profiles on the shared data.")
        return
    from torch import nn

    from lightning_modules import build_model
    from syno_automl.placeholder import substitute

    torch.set_float32_matmul_precision("high")
    device = torch.device("cuda")
    x = torch.randn(128, 3, 32, 32, device=device)

    def step_ms(model: nn.Module, train: bool, repeats: int = 10) -> float:
        times = []
        for i in range(repeats + 3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if train:
                model.zero_grad(set_to_none=True)
                model(x).square().mean().backward()
            else:
                with torch.no_grad():
                    model(x)
            torch.cuda.synchronize()
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    for target, train, compiled in (("cuda.eager", True, False), ("cuda.compiled", False, True)):
        profile = resolve(target)
        rows: list[tuple[float, float, bool]] = []
        for ratio in (None, 1.0):
            torch.manual_seed(0)
            sub = substitute(build_model("resnet18", 10, 3), nn.Conv2d, x.cpu(), cost_ratio=ratio, target=target,
                             where=lambda name, m: m.in_channels != 3, flops_ratio=0.5, seed=seed)
            model = sub.model.to(device).train(train)
            try:
                ops = sub.space.sample(count, seed=seed, time_limit=120)
            except Exception as e:  # an empty budget is a finding, not a crash
                print(f"  {target} budget {ratio}: {type(e).__name__}: {e}")
                continue
            sub.reset()
            run = torch.compile(model) if compiled else model
            base = step_ms(run, train)
            for op in ops:
                sub.apply(op)
                sub.model.to(device)
                run = torch.compile(sub.model) if compiled else sub.model
                try:
                    ms = step_ms(run, train)
                except RuntimeError as e:
                    print(f"  {op.hash}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                    continue
                rows.append((sub.cost_ratio(op), ms / base, ratio is not None))
                print(f"  {target} {op.hash} cost {rows[-1][0]:7.2f}x  measured {rows[-1][1]:6.2f}x", flush=True)
            sub.reset()
        if len(rows) > 2:
            c, m, inb = (np.array(v) for v in zip(*rows))
            print(f"{target}: Spearman(cost, {'train step' if train else 'compiled inference'}) all "
                  f"{spearmanr(c, m).statistic:.3f}, in budget {spearmanr(c[inb], m[inb]).statistic:.3f}; in budget: "
                  f"ratio p50 {quantile(list(m[inb]), .5):.2f}x p90 {quantile(list(m[inb]), .9):.2f}x "
                  f"({profile.target} profile from {profile.source[:60]}...)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--offline", action="store_true", help="evaluate the shipped profiles on --data")
    ap.add_argument("--fit", action="store_true", help="fit cuda.eager's coefficients on --data")
    ap.add_argument("--gpu", action="store_true", help="measure on this machine's GPU")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--metric", default="train_fp32", choices=("train_fp32", "train_bf16", "infer_fp32"))
    ap.add_argument("--operators", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.offline or args.fit or args.gpu):
        args.offline = args.gpu = True
    if args.fit:
        fit(args.data, args.metric)
    if args.offline:
        offline(args.data, args.metric)
    if args.gpu:
        gpu(args.operators, args.seed)


if __name__ == "__main__":
    main()
