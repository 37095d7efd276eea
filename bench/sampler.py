"""Decision time of SynoSampler with N finished trials stored, beside TPESampler's (issue 34, item 12; issue 46,
item 4).

The space is the one ``syno-automl search`` builds by default (small CNN on digits, budgets as shipped), the
sampler as `open_study` makes it (seed, exploration, flops_bins, the task's reward). The study holds a baseline
trial and N finished trials (default 1,000), made in one of two ways (--history):
  * decisions (the default): by N real decisions of a sampler, one after another on the growing (in-memory) study,
    each trial told a made-up value at once; its trials hold all the sampler records (operator, leaf, the rollouts,
    the nodes found dead: search/learned.py). These N asks are timed too ("fill": what filling the study cost a
    trial, back to back, no prefetch at work). TPE's study is filled the same way, on a two-parameter space (a
    log-float and an int);
  * made-up: N distinct operators drawn once with ``space.sample(N, seed=12345)`` (minutes: cached in --cache),
    recorded as the sampler records an operator (the user attrs ``syno.operator`` / ``syno.hash``, the system attrs
    ``syno:leaf`` / ``syno:source``) but with no rollouts and no dead nodes (no sampler made them), their leaves
    what an MCTS growing one node per trial would record (replayed in trial order: the first step of the path
    outside the tree so far); 1 in 20 failed, 1 in 20 pruned. TPE gets N finished trials of made-up values.
The values are made up, deterministic (seeded by the operator's hash).

Timed, on an in-memory storage and on SQLite (a temporary file), each given a copy of those trials, for each
sampler, each decision one `study.ask()` (then told a made-up value, untimed):
  * first: a new sampler's first decision on the stored trials: a new worker, a --resume (for SQLite also a new
    storage object, so nothing is cached). On the made-up history a SynoSampler finds no rollouts recorded: it
    samples what a sampler that made the trials would have recorded;
  * warm: the same sampler's next --asks decisions, back to back: the mean ± standard deviation, the median (and
    min-max);
  * cold: then another new sampler's first decision on the same study.
For SynoSampler `study.ask()` runs the whole decision (before_trial: the tree brought up to date with the study,
the MCTS walk and its rollouts, the operator written on the trial). As `open_study` does in a worker, the heap is
frozen (gc.freeze) once its study is loaded (--no-freeze: not), and thawed before TPE's figures (a plain Optuna
process). The ratios are ours / TPE's in the same run; nothing is asserted about time. Each ask's process CPU time
(all threads) is printed too: other work on a shared machine stretches it less than the wall time. --profile prints
cProfile's top for each part. With --trial-seconds S each told trial is held S seconds first (its evaluation):
SynoSampler's prefetch works then, TPE's figures do not change.

    python bench/sampler.py                       # 1,000 trials made by decisions, in-memory and SQLite
    python bench/sampler.py --history made-up     # 1,000 made-up trials (no fill)
    python bench/sampler.py --trial-seconds 1     # a 1 s evaluation between decisions (the default's: 1-3 s)
    python bench/sampler.py --trials 200 --asks 5 --storages memory --profile
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import optuna  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from syno_automl import vocabulary as V  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.search.sampler import SynoSampler  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.opening import sampler_reward  # noqa: E402
from syno_automl.study.storage import make_storage  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def operator_pool(space, n: int, cache_dir: Path) -> list[dict]:
    """n distinct operators of `space` ({"json", "hash", "path"}), sampled once and cached by space and n."""
    key = hashlib.blake2b(json.dumps([space.config(), n], sort_keys=True, default=str).encode(),
                          digest_size=8).hexdigest()
    path = cache_dir / f"syno-bench-sampler-{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    started = time.perf_counter()
    ops = space.sample(n, seed=12345, time_limit=3600.0)
    pool = [{"json": op.to_json(), "hash": op.hash, "path": list(op.path)} for op in ops]
    print(f"sampled {len(pool)} operators for the stored trials in {time.perf_counter() - started:.0f} s "
          f"(cached: {path})", flush=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(pool))
    return pool


def made_up_value(seed: int, key: str) -> float:
    return random.Random(f"{seed}:{key}").uniform(0.2, 0.97)


def syno_trials(pool: list[dict], seed: int) -> list[optuna.trial.FrozenTrial]:
    """The baseline and one finished trial per operator, recorded as SynoSampler records them."""
    trials = [optuna.create_trial(value=0.98, user_attrs={V.BASELINE: True})]
    in_tree: set[str] = set()
    for i, op in enumerate(pool):
        path = op["path"]
        # what an MCTS growing one node per decision records: the steps of the path up to the first node outside
        # the tree (the expanded leaf), or the whole path when it is all inside
        leaf = next((k + 1 for k, key in enumerate(path) if key not in in_tree), len(path))
        in_tree.update(path[:leaf])
        state = TrialState.FAIL if i % 20 == 7 else TrialState.PRUNED if i % 20 == 13 else TrialState.COMPLETE
        trials.append(optuna.create_trial(
            state=state, value=made_up_value(seed, op["hash"]) if state == TrialState.COMPLETE else None,
            user_attrs={V.OPERATOR: op["json"], V.HASH: op["hash"]},
            system_attrs={V.SYS_LEAF: leaf, V.SYS_SOURCE: "mcts"}))
    return trials


TPE_DISTRIBUTIONS = {"lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True),
                     "width": optuna.distributions.IntDistribution(8, 128)}


def tpe_trials(n: int, seed: int) -> list[optuna.trial.FrozenTrial]:
    rng = random.Random(seed)
    return [optuna.create_trial(value=rng.uniform(0.2, 0.97), distributions=TPE_DISTRIBUTIONS,
                                params={"lr": 10 ** rng.uniform(-4, 0), "width": rng.randint(8, 128)})
            for _ in range(n)]


def tpe_suggest(trial: optuna.Trial) -> None:
    trial.suggest_float("lr", 1e-4, 1.0, log=True)
    trial.suggest_int("width", 8, 128)


def time_asks(study: optuna.Study, k: int, suggest, value_of, profile: cProfile.Profile | None,
              trial_seconds: float = 0.0) -> list[tuple[float, float]]:
    """(wall seconds, process CPU seconds) of each of k `study.ask()` (plus `suggest`), each trial told
    `value_of(trial)` untimed, after `trial_seconds` (the trial's evaluation). The CPU time is the process's, all
    threads (a rollout's two sampling threads, a prefetch finishing the rollout the ask waits for): a figure that
    the other work on the machine does not stretch."""
    out = []
    for _ in range(k):
        if profile is not None:
            profile.enable()
        started, cpu = time.perf_counter(), time.process_time()
        trial = study.ask()
        suggest(trial)
        out.append((time.perf_counter() - started, time.process_time() - cpu))
        if profile is not None:
            profile.disable()
        time.sleep(trial_seconds)
        study.tell(trial, value_of(trial))
    return out


def new_storage(kind: str, tmp: Path, name: str) -> optuna.storages.BaseStorage:
    if kind == "memory":
        return optuna.storages.InMemoryStorage()
    return make_storage(f"sqlite:///{tmp / (name + '.db')}", heartbeat_interval=None)


class Figures(NamedTuple):
    first: float        # the first ask of the sampler on the stored trials
    warm: list[float]   # its next asks
    cold: float         # a new sampler's (and for SQLite a new storage object's) first ask, after those
    cpu: tuple[float, list[float], float]  # the same asks' process CPU seconds (first, warm, cold)


def measure_one(kind: str, tmp: Path, name: str, trials: list, make_sampler, suggest, value_of, args,
                label: str, freeze: bool = False) -> Figures:
    """`freeze`: the heap frozen after each load_study, as open_study does (syno_automl.study.opening.freeze_heap),
    and thawed at the end."""
    storage = new_storage(kind, tmp, name)
    optuna.create_study(study_name=name, storage=storage, direction="maximize").add_trials(trials)
    if kind != "memory":  # a worker opens its own storage (no cache of the trials yet)
        storage = new_storage(kind, tmp, name)
    profiles = {part: cProfile.Profile() if args.profile else None for part in ("first", "warm", "cold")}
    study = optuna.load_study(study_name=name, storage=storage, sampler=make_sampler())
    if freeze:
        gc.freeze()
    first = time_asks(study, 1, suggest, value_of, profiles["first"], args.trial_seconds)[0]
    warm = time_asks(study, args.asks, suggest, value_of, profiles["warm"], args.trial_seconds)
    if kind != "memory":
        storage = new_storage(kind, tmp, name)
    study = optuna.load_study(study_name=name, storage=storage, sampler=make_sampler())
    if freeze:  # (a new worker's heap: frozen once its study is open)
        gc.freeze()
    cold = time_asks(study, 1, suggest, value_of, profiles["cold"])[0]
    if freeze:
        gc.unfreeze()
    for part, profile in profiles.items():
        if profile is not None:
            print(f"\n--- cProfile: {label} {part} ({kind}) ---")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(args.profile_lines)
    return Figures(first[0], [w for w, _ in warm], cold[0], (first[1], [c for _, c in warm], cold[1]))


class Side(NamedTuple):
    """One sampler's part: how to make it, what an ask suggests, the value a trial is told, its stored trials."""
    make_sampler: Callable[[], optuna.samplers.BaseSampler]
    suggest: Callable[[optuna.Trial], None]
    value_of: Callable[[optuna.Trial], float]
    trials: list[optuna.trial.FrozenTrial]
    fill: list[float]   # the wall seconds of the asks that made the trials (--history decisions), else []
    freeze: bool


def fill_by_decisions(n: int, make_sampler, suggest, value_of, baseline: bool) -> tuple[list, list[float]]:
    """N asks one after another on a new in-memory study (after a baseline trial for SynoSampler), each told
    `value_of(trial)` at once: (the study's trials, each ask's wall seconds)."""
    study = optuna.create_study(direction="maximize", sampler=make_sampler())
    if baseline:
        study.enqueue_trial({}, user_attrs={V.BASELINE: True})
        study.tell(study.ask(), 0.98)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        trial = study.ask()
        suggest(trial)
        times.append(time.perf_counter() - started)
        study.tell(trial, value_of(trial))
    return study.get_trials(deepcopy=True), times


def sides(args, space, config, context) -> dict[str, Side]:
    def syno_sampler() -> SynoSampler:
        options = {"prefetch": False} if args.no_prefetch else {}  # (the sampler before prefetch had no option)
        return SynoSampler(space, seed=config.seed, exploration=config.exploration,
                           reward=sampler_reward(config, context), flops_bins=config.flops_bins, **options)

    def fill_sampler() -> SynoSampler:  # back to back: a prefetch would only compete with the next decision
        return SynoSampler(space, seed=config.seed, exploration=config.exploration,
                           reward=sampler_reward(config, context), flops_bins=config.flops_bins, prefetch=False)

    def syno_value(trial: optuna.Trial) -> float:
        return made_up_value(args.seed, str(trial.user_attrs.get(V.HASH)))

    rng = random.Random(args.seed + 1)

    def tpe_value(trial: optuna.Trial) -> float:
        return rng.uniform(0.2, 0.97)

    def tpe_sampler() -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=args.seed)

    if args.history == "decisions":
        started = time.perf_counter()
        syno, syno_fill = fill_by_decisions(args.trials, fill_sampler, lambda t: None, syno_value, baseline=True)
        tpe, tpe_fill = fill_by_decisions(args.trials, tpe_sampler, tpe_suggest, tpe_value, baseline=False)
        print(f"filled both studies by {args.trials} decisions each in {time.perf_counter() - started:.0f} s",
              flush=True)
    else:
        pool = operator_pool(space, args.trials, Path(args.cache))
        syno, tpe, syno_fill, tpe_fill = syno_trials(pool, args.seed), tpe_trials(len(pool), args.seed), [], []
    return {"SynoSampler": Side(syno_sampler, lambda t: None, syno_value, syno, syno_fill, not args.no_freeze),
            "TPESampler": Side(tpe_sampler, tpe_suggest, tpe_value, tpe, tpe_fill, False)}


def measure(kind: str, tmp: Path, args, parts: dict[str, Side]) -> dict[str, Figures]:
    out = {}
    for name, side in parts.items():
        profiled = args if name == "SynoSampler" or args.profile_tpe else \
            argparse.Namespace(**{**vars(args), "profile": False})
        out[name] = measure_one(kind, tmp, name.lower(), side.trials, side.make_sampler, side.suggest,
                                side.value_of, profiled, name, freeze=side.freeze)
    return out


def spread(values: list[float]) -> str:
    """mean ± standard deviation, in ms."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) * 1e3:.1f} ± {sd * 1e3:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="finished trials stored (default: %(default)s)")
    parser.add_argument("--history", choices=["decisions", "made-up"], default="decisions",
                        help="how the stored trials are made (default: %(default)s; see above)")
    # 200: on the made-up history the decisions at 1,000 trials changed in kind after about 17 (the tree's best
    # leaves dead, then fallbacks), so a median of 10 did not see them; and a few decisions that meet new dead leaves
    # (0.3-0.6 s) carry a short window's mean (60 asks: 53-108 ms wall, where 200 gave 39 ms, on the same fill)
    parser.add_argument("--asks", type=int, default=200, help="warm decisions timed (default: %(default)s)")
    parser.add_argument("--storages", nargs="+", choices=["memory", "sqlite"], default=["memory", "sqlite"])
    parser.add_argument("--seed", type=int, default=0, help="the made-up values' seed")
    parser.add_argument("--trial-seconds", type=float, default=0.0,
                        help="seconds between each ask and its tell, as a trial's evaluation (default: %(default)s: "
                             "none; SynoSampler prefetches the next decision's rollouts meanwhile)")
    parser.add_argument("--no-prefetch", action="store_true", help="SynoSampler(prefetch=False)")
    parser.add_argument("--no-freeze", action="store_true",
                        help="SynoSampler's heap not frozen after load_study (open_study freezes it)")
    parser.add_argument("--cache", default=tempfile.gettempdir(), help="folder of the sampled operators' cache")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top of SynoSampler's asks")
    parser.add_argument("--profile-tpe", action="store_true", help="and of TPESampler's")
    parser.add_argument("--profile-lines", type=int, default=30)
    args = parser.parse_args()

    config = SearchConfig(tracking_uri=None)
    context = prepare(config)
    parts = sides(args, context.space, config, context)
    rows = []
    with tempfile.TemporaryDirectory(prefix="syno-bench-sampler-") as tmp:
        for kind in args.storages:
            rows.append((kind, measure(kind, Path(tmp), args, parts)))
    n = len(parts["SynoSampler"].trials) - 1
    print(f"\n{n} finished trials stored (+ the baseline), made by {args.history}; first: a new sampler's first ask "
          f"on them (a new worker, a --resume; SQLite: also a new storage object); warm: its next {args.asks} asks; "
          f"cold: then another new sampler's first ask; {args.trial_seconds:g} s between an ask and its tell; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    if args.history == "decisions":
        print("\n| sampler | fill: mean | fill: median | fill: max |\n|---|---:|---:|---:|")
        for name, side in parts.items():
            print(f"| {name} | {spread(side.fill)} | {statistics.median(side.fill) * 1e3:.1f} ms | "
                  f"{max(side.fill) * 1e3:.0f} ms |")
    print("\n| storage | sampler | first | warm (mean ± sd) | warm (median) | warm (min-max) | cold |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind, figures in rows:
        for name, f in figures.items():
            print(f"| {kind} | {name} | {f.first * 1e3:.1f} ms | {spread(f.warm)} | "
                  f"{statistics.median(f.warm) * 1e3:.1f} ms | {min(f.warm) * 1e3:.1f}-{max(f.warm) * 1e3:.1f} ms | "
                  f"{f.cold * 1e3:.1f} ms |")
    print("\nCPU time of the process during the same asks (all its threads; load-independent, as far as a shared "
          "cache allows):")
    print("| storage | sampler | first (CPU) | warm (mean CPU) | warm (median CPU) | cold (CPU) |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, figures in rows:
        for name, f in figures.items():
            first_cpu, warm_cpu, cold_cpu = f.cpu
            print(f"| {kind} | {name} | {first_cpu * 1e3:.1f} ms | {statistics.mean(warm_cpu) * 1e3:.1f} ms | "
                  f"{statistics.median(warm_cpu) * 1e3:.1f} ms | {cold_cpu * 1e3:.1f} ms |")
    for kind, figures in rows:
        for name, f in figures.items():
            print(f"{kind} {name} warm asks (ms): {' '.join(f'{t * 1e3:.0f}' for t in f.warm)}")
    print("\n| storage | first: ours / TPE | warm mean: ours / TPE | warm median: ours / TPE | cold: ours / TPE |")
    print("|---|---:|---:|---:|---:|")
    for kind, figures in rows:
        ours, tpe = figures["SynoSampler"], figures["TPESampler"]
        mean, median = statistics.mean, statistics.median
        print(f"| {kind} | {ours.first / tpe.first:.1f}x | {mean(ours.warm) / mean(tpe.warm):.1f}x | "
              f"{median(ours.warm) / median(tpe.warm):.1f}x | {ours.cold / tpe.cold:.1f}x |")


if __name__ == "__main__":
    main()
