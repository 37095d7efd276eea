"""MCTS (SynoSampler) vs random sampling on digits, and the sampler's decision time with 1,000 trials stored.

Part 1 -- search efficiency. The same space (small CNN's two 3x3 convs, FLOPs <= 0.5x), the same seeds (3 each):
  * MCTS: an Optuna study with SynoSampler(seed), the baseline's accuracy known (trial 0 of a real search);
  * random: the space's own random sampler, space.sample(cap, seed) -- distinct canonical operators.
Both train each operator exactly as `syno-automl search` does (3 epochs, milestone 1: 0.2, 60 s limit) and count
the trials until the first operator within 1 percentage point of the baseline accuracy. Evaluations are cached
by operator hash (training is deterministic for a fixed seed on 1 thread), so an operator proposed by both
methods is trained once. The search is capped at --cap trials per run.

Part 2 -- decision time. 1,000 finished trials with operators in an SQLite study; the time of `study.ask()`
(which runs before_trial, i.e. the whole MCTS decision including rollouts) for SynoSampler, cold (a new
process-like sampler rebuilding from 1,000 trials) and warm (incremental), vs TPESampler on 1,000 trials of
three parameters, in the same run.

    python bench/search.py                    # both parts (~15-20 min on 2 busy cores)
    python bench/search.py --part decision    # part 2 only
Prints figures only; nothing is asserted about timings.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import optuna  # noqa: E402

from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.search.mcts import SearchExhaustedError  # noqa: E402
from syno_automl.search.sampler import SynoSampler  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.opening import sampler_reward  # noqa: E402
from syno_automl.study.training import train_operator  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
import logging  # noqa: E402

import lightning.pytorch  # noqa: E402,F401 - sets its loggers' levels on import: quiet them after

for _name in ("lightning", "lightning.pytorch", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.WARNING)


class Evaluator:
    """Trains an operator (or the baseline) once; results cached on disk by hash."""

    def __init__(self, context, cache: Path) -> None:
        self.context = context
        self.cache_path = cache
        self.cache: dict[str, float | None] = json.loads(cache.read_text()) if cache.exists() else {}
        self.trained = 0
        self.seconds = 0.0

    def __call__(self, op) -> float | None:
        key = "baseline" if op is None else op.hash
        if key not in self.cache:
            started = time.time()
            try:
                acc = train_operator(self.context, None, None, epochs=self.context.config.epochs, operator=op,
                                     milestones=self.context.config.milestones)
            except optuna.TrialPruned:
                acc = 0.0
            except Exception as e:  # noqa: BLE001 -- too slow, NaN, ...: a failed trial
                print(f"      {key}: failed ({type(e).__name__}: {str(e)[:80]})", flush=True)
                acc = None
            self.seconds += time.time() - started
            self.trained += 1
            self.cache[key] = acc
            self.cache_path.write_text(json.dumps(self.cache, indent=0))
        return self.cache[key]


def run_mcts(context, evaluate: Evaluator, seed: int, cap: int, target: float) -> dict:
    sampler = SynoSampler(context.space, seed=seed, reward=sampler_reward(context.config, context))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    hit, best, decide, accs = None, 0.0, [], []
    for n in range(1, cap + 1):
        started = time.time()
        try:
            trial = study.ask()
        except SearchExhaustedError:
            break
        decide.append(time.time() - started)
        try:
            op = sampler.operator_of(trial)
        except Exception:  # noqa: BLE001 -- an operator that cannot be decoded: a failed trial
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        acc = evaluate(op)
        accs.append(acc or 0.0)
        if acc is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            continue
        study.tell(trial, acc)
        best = max(best, acc)
        if hit is None and acc >= target:
            hit = n
            break
    return {"hit": hit, "best": best, "trials": n, "accs": accs,
            "decision_s": statistics.mean(decide) if decide else 0.0}


def run_random(context, evaluate: Evaluator, seed: int, cap: int, target: float) -> dict:
    started = time.time()
    ops = context.space.sample(cap, seed=seed)
    decide = (time.time() - started) / max(len(ops), 1)
    hit, best, accs = None, 0.0, []
    for n, op in enumerate(ops, 1):
        acc = evaluate(op)
        accs.append(acc or 0.0)
        best = max(best, acc or 0.0)
        if acc is not None and acc >= target:
            hit = n
            break
    return {"hit": hit, "best": best, "trials": n, "accs": accs, "decision_s": decide}


def part_search(args) -> None:
    config = SearchConfig(epochs=args.epochs, tracking_uri=None, trial_timeout=args.timeout)
    context = prepare(config)
    cache = Path(args.cache)
    evaluate = Evaluator(context, cache)
    base = evaluate(None)
    target = base - 0.01
    print(f"baseline val_acc {base:.4f} ({config.epochs} epochs); target >= {target:.4f} at <= "
          f"{config.flops_ratio}x FLOPs of {context.substitution.baseline_flops / 1e6:.1f} MFLOPs; cap {args.cap} "
          f"trials per run", flush=True)
    rows = []
    started = time.time()
    for seed in range(args.seeds):
        for name, run in (("mcts", run_mcts), ("random", run_random)):
            t0 = time.time()
            r = run(context, evaluate, seed, args.cap, target)
            rows.append((name, seed, r))
            first = r["hit"] or f">{r['trials']}"
            print(f"  {name:6} seed {seed}: first hit at trial {first}, best val_acc "
                  f"{r['best']:.4f}, {r['decision_s']:.2f} s/decision ({time.time() - t0:.0f} s)", flush=True)
    print(f"\nsearch efficiency ({time.time() - started:.0f} s, {evaluate.trained} operators trained, "
          f"{evaluate.seconds:.0f} s of training):")
    print("| method | seed 0 | seed 1 | seed 2 | mean best val_acc |\n|---|---:|---:|---:|---:|")
    for name in ("mcts", "random"):
        mine = [r for n, _, r in rows if n == name]
        cells = [str(r["hit"]) if r["hit"] else f">{r['trials']}" for r in mine]
        print(f"| {name} | {' | '.join(cells)} | {statistics.mean(r['best'] for r in mine):.4f} |")
    print("\ntrials until the first operator at or above a lower accuracy (secondary thresholds, same runs):")
    print("| method | " + " | ".join(f">= {t:.2f}" for t in args.thresholds) + " |")
    print("|---|" + "---:|" * len(args.thresholds))
    for name in ("mcts", "random"):
        mine = [r for n, _, r in rows if n == name]
        cells = []
        for t in args.thresholds:
            firsts = [next((i + 1 for i, a in enumerate(r["accs"]) if a >= t), None) for r in mine]
            cells.append(", ".join(str(f) if f else f">{r['trials']}" for f, r in zip(firsts, mine)))
        print(f"| {name} | " + " | ".join(cells) + " |")
    accs = sorted((v for k, v in evaluate.cache.items() if k != "baseline" and v is not None), reverse=True)
    if accs:
        print(f"operators trained: {len(accs)} ok, best {accs[0]:.4f}, median {statistics.median(accs):.4f}; "
              f"baseline {base:.4f}")


def part_decision(args) -> None:
    config = SearchConfig(tracking_uri=None)
    context = prepare(config)
    space = context.space
    n = args.stored
    started = time.time()
    ops = space.sample(n, seed=12345, time_limit=1800.0)
    print(f"\ndecision time: sampled {len(ops)} distinct operators for the stored trials in "
          f"{time.time() - started:.0f} s", flush=True)
    rng = random.Random(0)
    tmp = Path(tempfile.mkdtemp(prefix="syno-bench-"))
    url = f"sqlite:///{tmp / 'decision.db'}"

    syno = optuna.create_study(study_name="syno", storage=url, direction="maximize")
    trials = []
    for op in ops:
        text = op.to_json()
        trials.append(optuna.create_trial(value=rng.uniform(0.1, 1.0), user_attrs={"syno.hash": op.hash,
                                          "syno.operator": text},
                                          system_attrs={"syno:operator": text, "syno:leaf": rng.randint(1, 3),
                                                        "syno:source": "mcts"}))
    syno.add_trials(trials)
    tpe = optuna.create_study(study_name="tpe", storage=url, direction="maximize")
    dists = {"lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True),
             "width": optuna.distributions.IntDistribution(8, 128),
             "act": optuna.distributions.CategoricalDistribution(["relu", "gelu", "silu"])}
    tpe.add_trials([optuna.create_trial(value=rng.uniform(0.1, 1.0),
                                        params={"lr": 10 ** rng.uniform(-4, 0), "width": rng.randint(8, 128),
                                                "act": rng.choice(["relu", "gelu", "silu"])}, distributions=dists)
                    for _ in range(len(ops))])

    def timed_asks(study, k: int, suggest) -> list[float]:
        out = []
        for _ in range(k):
            t0 = time.time()
            trial = study.ask()
            suggest(trial)
            out.append(time.time() - t0)
            study.tell(trial, rng.uniform(0.1, 1.0))
        return out

    k = args.asks
    syno_study = optuna.load_study(study_name="syno", storage=url,
                                   sampler=SynoSampler(space, seed=0, reward=sampler_reward(config, context)))
    syno_times = timed_asks(syno_study, k, lambda t: None)
    tpe_study = optuna.load_study(study_name="tpe", storage=url, sampler=optuna.samplers.TPESampler(seed=0))
    tpe_times = timed_asks(tpe_study, k, lambda t: [t.suggest_float("lr", 1e-4, 1.0, log=True),
                                                     t.suggest_int("width", 8, 128),
                                                     t.suggest_categorical("act", ["relu", "gelu", "silu"])])
    print(f"| sampler ({len(ops)} finished trials in SQLite) | first ask (cold) | median of next {k - 1} | max |")
    print("|---|---:|---:|---:|")
    for name, ts in (("SynoSampler (MCTS)", syno_times), ("TPESampler", tpe_times)):
        print(f"| {name} | {ts[0] * 1e3:.0f} ms | {statistics.median(ts[1:]) * 1e3:.0f} ms | "
              f"{max(ts) * 1e3:.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["search", "decision", "both"], default="both")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cap", type=int, default=15, help="trials per run (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--stored", type=int, default=1000)
    parser.add_argument("--asks", type=int, default=10)
    parser.add_argument("--thresholds", type=float, nargs="*", default=[0.9, 0.85, 0.8])
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "syno-bench-search-cache.json"))
    args = parser.parse_args()
    if args.part in ("search", "both"):
        part_search(args)
    if args.part in ("decision", "both"):
        part_decision(args)


if __name__ == "__main__":
    main()
