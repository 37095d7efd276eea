"""Does the planned cost rank speed on a GPU target? (issue 24, figures only; nothing is asserted)

    PYTHONPATH=. python bench/gpu_cost.py --offline [--data ../shared/data/gpu_step_times_h200.json]
    PYTHONPATH=. python bench/gpu_cost.py --fit            # the cuda.eager coefficients from that data
    PYTHONPATH=. python bench/gpu_cost.py --ceiling        # how far any pricing of the plan's counts can rank it
    PYTHONPATH=. python bench/gpu_cost.py --gpu [--operators 24] [--compiled-operators 4] [--seed 0]

``--offline`` replays every row of the shared H200 data (ResNet-18 for CIFAR, batch 128, 13 3x3 convs
substituted; ../shared/data/README.md) and prints, per shipped profile, Spearman(predicted cost summed over the 13
layers, measured whole-model step) over all rows and over the rows inside the data's cost budget, and how many rows
the profile's own budget (cost_ratio <= 1) keeps with their measured step-time ratios. A training profile is
compared with train_fp32 (or --metric), an inference one (cuda.compiled) with infer_fp32: eager inference, the
nearest the data has to compiled inference (which it timed for 8 operators without their JSON).

``--fit`` fits the cuda.eager coefficients to that data: whole-model time = rest + the 13 layers' predicted cost,
``rest`` being the baseline's time less its 13 convolutions' predicted cost; least squares of log(ratio) with the
FLOP coefficient held at or above H200's dense TF32 peak (3 x 2 FLOPs per multiply-add, forward + backward).

``--ceiling`` asks what no profile can beat on that data: the in-budget Spearman of the best non-negative
combination of the plan's counts (FLOPs, elements written and read, kernels, view copies and their kernels) fitted
to the in-budget rows themselves (in sample, so an upper bound for any profile of the same counts), beside how well
the data's own measurements of one operator agree with each other (train_fp32 against train_bf16 and infer_fp32).

``--gpu`` (needs CUDA; skipped with a message otherwise) samples operators from that space as the data did (today's
cost budget off and on), times each substituted model against the baseline model in the same run -- eager training
step (cuda.eager) and compiled inference (cuda.compiled, fewer operators: each whole-model compile takes tens of
seconds) -- and prints per target Spearman(the target's predicted cost, measured time) and the measured ratios of
the operators inside the target's own budget (its cost_ratio <= 1).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from itertools import combinations
from pathlib import Path

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
    if not path.is_file():  # e.g. on a GPU host the checkout travelled to without ../shared
        print(f"bench/gpu_cost.py --offline: no data at {path}: skipped (copy ../shared/data/{path.name} into the "
              f"checkout's shared/data/, as scripts/fetch_gpu_wheels.sh does)")
        return
    data = json.loads(path.read_text())
    counts, convs = replay(data)
    ratio = np.array([r["ratio"][metric] for r in data["rows"]])
    inside = np.array([r["budget"] == "on" for r in data["rows"]])
    print(f"{path.name}: {len(ratio)} rows ({inside.sum()} inside the data's cost budget), {data['device']}, "
          f"torch {data['torch']}; measured: {metric} ratio to the baseline model in the same run")
    for name in SHIPPED:
        profile = resolve(name)
        measured = metric if profile.step == "train" else "infer_fp32"  # the data's nearest to compiled inference
        ratio = np.array([r["ratio"][measured] for r in data["rows"]])
        ratios = np.array([cost_ratio(profile, layers, convs) for layers in counts])
        rho_all = spearmanr(ratios, ratio).statistic
        rho_in = spearmanr(ratios[inside], ratio[inside]).statistic
        kept = ratios <= 1.0
        kept_ratios = list(ratio[kept])
        print(f"  {name:14s} Spearman(cost, {measured}) all {rho_all:.3f}, inside the data's budget {rho_in:.3f}; "
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


CEILING_COUNTS = ("flops", "materialized", "read", "kernels", "copied", "copy_kernels", "copy_read")


def ceiling(path: Path, metric: str, draws: int = 20_000) -> None:
    from scipy.optimize import nnls

    data = json.loads(path.read_text())
    counts, _ = replay(data)
    inside = np.array([r["budget"] == "on" for r in data["rows"]])
    measured = {m: np.array([r["ratio"][m] for r in data["rows"]])[inside]
                for m in ("train_fp32", "train_bf16", "infer_fp32")}
    y = measured[metric]
    x = np.array([[sum(layer[k] for layer in layers) for k in CEILING_COUNTS] for layers in counts])[inside]
    x = x / x.mean(axis=0)  # each count in units of its mean, so that weights are comparable

    def rho(predicted: np.ndarray) -> float:
        return -1.0 if np.ptp(predicted) == 0 else float(spearmanr(predicted, y).statistic)

    print(f"{path.name}: {len(y)} rows inside the data's cost budget, {metric}")
    for n in range(1, len(CEILING_COUNTS) + 1):  # least squares (with the rest of the model as a constant)
        fits = []
        for cols in combinations(range(len(CEILING_COUNTS)), n):
            a = np.hstack([x[:, list(cols)], np.ones((len(y), 1))])
            fits.append((rho(a @ nnls(a, y)[0]), cols))
        r, cols = max(fits)
        print(f"  least squares, best {n} count{'s' if n > 1 else ' '}: Spearman {r:.3f} "
              f"({', '.join(CEILING_COUNTS[c] for c in cols)})")
    # the rank itself, maximized over random non-negative weights (log-uniform over six decades, some zero)
    rng = np.random.default_rng(0)
    weights = 10.0 ** rng.uniform(-3, 3, (draws, len(CEILING_COUNTS))) * (rng.random((draws, len(CEILING_COUNTS))) < .7)
    best = max(range(draws), key=lambda i: rho(x @ weights[i]))
    print(f"  the best of {draws} random non-negative pricings, ranked in sample: "
          f"Spearman {rho(x @ weights[best]):.3f}")
    for other in measured:
        if other != metric:
            print(f"  the data's {metric} against its {other} (same operators, same run): Spearman "
                  f"{spearmanr(y, measured[other]).statistic:.3f}")


def gpu(count_eager: int, count_compiled: int, seed: int) -> None:
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

    # operators as the shared data drew them: the FLOPs budget 0.5x, today's cost budget off and on (1.0x); each
    # target then prices them with its own profile (cost_ratio <= 1: inside that target's budget)
    plans = (("cuda.eager", True, False, count_eager), ("cuda.compiled", False, True, count_compiled))
    rows: dict[str, list[tuple[float, float, bool]]] = {target: [] for target, *_ in plans}
    for budget in (None, 1.0):
        torch.manual_seed(0)
        sub = substitute(build_model("resnet18", 10, 3), nn.Conv2d, x.cpu(), cost_ratio=budget,
                         where=lambda name, m: m.in_channels != 3, flops_ratio=0.5, seed=seed)
        convs = conv_counts(sub.mappings)
        ops = sub.space.sample(max(count_eager, count_compiled), seed=seed, time_limit=300)
        for target, train, compiled, count in plans:
            profile = resolve(target)
            sub.reset()
            sub.model.to(device).train(train)
            base = step_ms(torch.compile(sub.model) if compiled else sub.model, train)  # the same run's baseline
            for op in ops[:count]:
                sub.apply(op)
                sub.model.to(device).train(train)
                try:
                    ms = step_ms(torch.compile(sub.model) if compiled else sub.model, train)
                except RuntimeError as e:  # e.g. out of memory: reported, not timed
                    print(f"  {op.hash}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
                    continue
                layers = [op.cost(sub.mapping_for(op, k)) for k in range(len(sub.placeholders))]
                rows[target].append((cost_ratio(profile, layers, convs), ms / base, budget is not None))
                print(f"  {target:13s} budget {budget} {op.hash}  cost {rows[target][-1][0]:7.2f}x  measured "
                      f"{rows[target][-1][1]:6.2f}x (baseline {base:.2f} ms)", flush=True)
            sub.reset()
    for target, train, *_ in plans:
        if len(rows[target]) < 3:
            print(f"{target}: too few operators timed")
            continue
        c, m, inb = (np.array(v) for v in zip(*rows[target]))
        own = c <= 1.0
        print(f"{target}: Spearman(cost, {'eager train step' if train else 'compiled inference'}) all "
              f"{spearmanr(c, m).statistic:.3f}, inside today's budget {spearmanr(c[inb], m[inb]).statistic:.3f}; "
              f"inside {target}'s own budget: {own.sum()} operators, measured ratio p50 "
              f"{quantile(list(m[own]), .5):.2f}x p90 {quantile(list(m[own]), .9):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--offline", action="store_true", help="evaluate the shipped profiles on --data")
    ap.add_argument("--fit", action="store_true", help="fit cuda.eager's coefficients on --data")
    ap.add_argument("--ceiling", action="store_true",
                    help="the best in-budget Spearman any pricing of the plan's counts reaches on --data")
    ap.add_argument("--gpu", action="store_true", help="measure on this machine's GPU")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--metric", default="train_fp32", choices=("train_fp32", "train_bf16", "infer_fp32"))
    ap.add_argument("--operators", type=int, default=24, help="per budget, eager (--gpu)")
    ap.add_argument("--compiled-operators", type=int, default=4, help="per budget, compiled (--gpu)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.offline or args.fit or args.ceiling or args.gpu):
        args.offline = args.gpu = True
    if args.fit:
        fit(args.data, args.metric)
    if args.offline:
        offline(args.data, args.metric)
    if args.ceiling:
        ceiling(args.data, args.metric)
    if args.gpu:
        gpu(args.operators, args.compiled_operators, args.seed)


if __name__ == "__main__":
    main()
