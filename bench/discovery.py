"""Discovery benchmark (issue 14): does a search find an operator that makes the model faster at the same accuracy?

N seeds (default 5) x a fixed budget of operator trials (default 30) on the default task (small CNN on digits;
--dataset mnist1d: that dataset's defaults, a 1-D CNN with Conv1d layers and its cost budget), for
  * shipped: the search as `syno-automl search` runs it (its study, sampler, pruning, objective; no MLflow);
  * random:  the same study and training, every operator trial enqueued from the space's own random sampler
             (space.sample(budget, seed): distinct canonical operators) -- bench/search.py's baseline method;
  * accuracy: the shipped search with ``objective="accuracy"`` (the single objective: no speed in the reward);
  * screened: the shipped search with ``screen`` on (--screen, --screen-threshold: study/screen.py): an operator
             that fails the screen is pruned before its training (not in the default --methods);
  * METHOD-no-opening: METHOD with ``opening="none"``: no known operators enqueued first (known.opening), so
             every operator trial comes from the method itself (shipped-no-opening is the search as shipped
             before the opening existed).
Each run ends with the search's own final stage (syno_automl.study.finalists: up to --finalists operators cheaper
than the replaced layers re-trained with the baseline, --final-seeds seeds x --final-epochs epochs, whole models
timed: torch eager inference, batch 64, the search's 1 thread, interleaved with the baseline, medians).

Figures per method (nothing asserted):
  * hit: the operator trials until the first operator with measured model speedup >= --speedup at <= --margin
    accuracy loss after the final re-training (among the run's finalists: the earliest qualifying finalist's
    position in the run, the opening's trials included), ">budget" when none; median over seeds;
  * searched hit: the same, counting only the operators the method proposed (not the opening's);
  * new hit: the same for an operator that is not a known form up to channel permutations (convolution, grouped
    or depthwise, 1x1, pooling ...: syno_automl.classify), its position among the method's own trials (the
    opening's left out; every run has --budget of them beside the opening's);
  * found: the share of seeds with such an operator;
  * best speedup: the best measured speedup of a finalist within the margin (any speedup);
  * hypervolume of the run's front (search accuracy, planned cost ratio) with optuna's compute_hypervolume,
    reference = the baseline (its search accuracy, cost 1.0) as the issue asks, and (more telling while no
    operator beats the baseline) reference = (chance accuracy, cost 1.0).

Cached evaluations (--cache, JSON): an operator (by hash) is trained once per (epochs, training seed) and the
outcome (value, the trial's cost attributes, intermediate reports, pruned/failed) is replayed for every method and
seed that proposes it; so each search trial trains with one fixed training seed (0) instead of the shipped
``seed + trial number`` (the only change to the shipped path), and the final stage's seeds are 0..k-1 in every run.
Measured speedups are cached by hash too (the first measurement, in the process that made it, against its
baseline). A replayed trial reports its cached intermediate values where the search reports them (its own study,
or a pareto search's companion study ``<study>.fidelity``, as search/fidelity.py does; the baseline never) and
stops where the pruner says, so that later trials meet the same competitors as in a search without the cache.
Optuna's HyperbandPruner picks a trial's bracket from a hash of (study name, trial number): runs are named
``<method>-<seed>``, so renaming a method changes which of its trials are pruned (random-no-opening is not a
replay of an older run's random).

    python bench/discovery.py                                # 5 seeds x 30 trials (see the note for the time)
    nice -n 10 python bench/discovery.py --seeds 2 --budget 8
    nice -n 10 python bench/discovery.py --dataset mnist1d --methods shipped,random
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import optuna  # noqa: E402

import syno_automl.study.finalists as finalists  # noqa: E402
import syno_automl.study.training as training  # noqa: E402
from syno_automl import vocabulary as V  # noqa: E402
from syno_automl.classify import classify  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.search.fidelity import fidelity_study_name, make_pruner, open_fidelity_study  # noqa: E402
from syno_automl.search.objectives import baseline_trial  # noqa: E402
from syno_automl.search.sampler import operator_json_of  # noqa: E402
from syno_automl.space import Operator  # noqa: E402
from syno_automl.speed.paired import SpeedupEstimate  # noqa: E402
from syno_automl.speed.probe import SpeedMeasurement  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.opening import open_study, remaining_trials  # noqa: E402
from syno_automl.study.storage import make_storage  # noqa: E402,F401 (the study's storage, as the CLI's)
from syno_automl.study.trial import Objective  # noqa: E402
from syno_automl.tasks import task_of  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
import lightning.pytorch  # noqa: E402,F401 - sets its loggers' levels on import: quiet them after

for _name in ("lightning", "lightning.pytorch", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.WARNING)

_ATTRS = (V.FLOPS, V.PARAMS, V.BASELINE_FLOPS, V.FLOPS_RATIO, V.COST, V.COST_RATIO,
          V.MATERIALIZED, V.PEAK)
FINAL_SEED_BASE = 1000     # the final stage's training seeds: FINAL_SEED_BASE + s in every run
_ORIGINAL_TRAIN = training.train_operator
_ORIGINAL_MEASURE = finalists.measure_speedups


class Cache:
    """Outcomes by "<hash>|<epochs>|<training seed>", speedups by hash; written after every new entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = json.loads(path.read_text()) if path.exists() else {}
        self.runs: dict[str, Any] = data.get("runs", {})
        self.speedups: dict[str, Any] = data.get("speedups", {})
        self.trained = self.replayed = 0
        self.train_s = 0.0
        self.run_seed = 0  # the current run's search seed (the final stage's seeds are counted from it)

    def save(self) -> None:
        self.path.write_text(json.dumps({"runs": self.runs, "speedups": self.speedups}))

    # -- the search's training, cached ---------------------------------------------------------------------
    def train(self, context, trial, run, *, epochs: int, operator=None, milestones=None, timeout=-1.0,
              steps=None) -> float:
        if trial is not None:  # a search trial: training seed 0 (train_operator adds the trial number)
            baseline = bool(trial.user_attrs.get(V.BASELINE))
            label = "baseline" if baseline else trial.user_attrs.get(V.HASH) or "unknown"
            seed, shift = 0, -trial.number
        else:  # the final stage: retrain() passes seed config.seed + s
            label = operator.hash if operator is not None else "baseline"
            s = context.config.seed - self.run_seed
            seed, shift = FINAL_SEED_BASE + s, FINAL_SEED_BASE + s
        key = f"{label}|{epochs}|{seed}"
        hit = self.runs.get(key)
        if hit is not None and trial is not None and label != "unknown":
            replayed = self._replay(trial, hit, context.config, epochs)
            if replayed is not None:
                self.replayed += 1
                return replayed
        elif hit is not None and trial is None:
            self.replayed += 1
            if hit["outcome"] == "complete":
                return hit["value"]
            raise RuntimeError(hit.get("reason", "failed (cached)"))
        seeded = dataclasses.replace(context, config=dataclasses.replace(context.config, seed=shift))
        started = time.time()
        entry: dict[str, Any] = {"outcome": "complete"}
        try:
            value = _ORIGINAL_TRAIN(seeded, trial, run, epochs=epochs, operator=operator, milestones=milestones,
                                    timeout=timeout, steps=steps)
            entry["value"] = value
        except optuna.TrialPruned as e:
            entry.update(outcome="pruned", reason=str(e))
            raise
        except Exception as e:
            entry.update(outcome="failed", reason=f"{type(e).__name__}: {e}"[:300])
            raise
        finally:
            self.trained += 1
            self.train_s += time.time() - started
            if trial is not None:
                frozen = trial.study._storage.get_trial(trial._trial_id)
                entry["attrs"] = {k: frozen.user_attrs[k] for k in _ATTRS if k in frozen.user_attrs}
                entry["reports"] = {str(k): v for k, v in self._reports(trial.study, frozen).items()}
            if label != "unknown":
                self.runs[key] = entry
                self.save()
        return value

    @staticmethod
    def _reports(study: optuna.Study, frozen: optuna.trial.FrozenTrial) -> dict[int, float]:
        """The trial's per-epoch values: on the trial itself, or (a pareto search) on its companion trial."""
        number = frozen.user_attrs.get(V.FIDELITY_TRIAL)
        if frozen.intermediate_values or number is None:
            return dict(frozen.intermediate_values)
        storage = study._storage
        companion = storage.get_study_id_from_name(fidelity_study_name(study.study_name))
        return dict(storage.get_trial(storage.get_trial_id_from_study_id_trial_number(companion, number))
                    .intermediate_values)

    @staticmethod
    def _replay(trial, hit: dict[str, Any], config: SearchConfig, epochs: int) -> float | None:
        """The cached outcome on `trial` (attrs; the reports go where the search sends them and its pruner is
        asked as the search asks it: the trial's own study, or the companion study of a pareto search, never
        for the baseline, never after the last epoch); None when the cache stopped earlier than this replay
        would (pruned then, not now): train it again."""
        for k, v in hit.get("attrs", {}).items():
            trial.set_user_attr(k, v)
        target, companion = None, None
        if not trial.user_attrs.get(V.BASELINE):
            if len(trial.study.directions) == 1:
                target = trial
            elif config.pruner != "none":
                companion = open_fidelity_study(trial.study, make_pruner(config.pruner, epochs), config.direction)
                target = companion.ask()
                target.set_user_attr(V.SEARCH_TRIAL, trial.number)
                trial.set_user_attr(V.FIDELITY_TRIAL, target.number)

        def finish(state: optuna.trial.TrialState, value: float | None = None) -> None:
            if companion is not None:
                companion.tell(target, value, state=state)

        last = None
        for step, value in sorted(hit.get("reports", {}).items(), key=lambda kv: int(kv[0])):
            last = value
            if target is not None:
                target.report(value, int(step))
                if int(step) < epochs and target.should_prune():
                    finish(optuna.trial.TrialState.PRUNED)
                    raise optuna.TrialPruned(f"val_acc={value:.4f} at epoch {step} (pruner, replayed)")
        if hit["outcome"] == "complete":
            finish(optuna.trial.TrialState.COMPLETE, last if last is not None else hit["value"])
            return hit["value"]
        finish(optuna.trial.TrialState.FAIL)   # failed then, or pruned then and not now (trained again below)
        if hit["outcome"] == "failed":
            raise RuntimeError(hit["reason"])
        if "milestone" in hit.get("reason", ""):
            raise optuna.TrialPruned(hit["reason"])
        return None

    # -- the final stage's timing, cached ------------------------------------------------------------------
    def measure(self, context, ops, target=None, threads=None):
        todo = [op for op in ops if op.hash not in self.speedups]
        result = SpeedMeasurement("cached")
        if todo or not ops:
            result = _ORIGINAL_MEASURE(context, todo, target, threads)
            for op, estimate in zip(todo, result.estimates):
                self.speedups[op.hash] = {"estimate": None if estimate is None else estimate.to_dict(),
                                          "baseline_ms": result.baseline_ms, "label": result.label}
            self.save()
        first = next((self.speedups[op.hash] for op in ops), None)
        estimates = [None if self.speedups[op.hash].get("estimate") is None
                     else SpeedupEstimate.from_dict(self.speedups[op.hash]["estimate"]) for op in ops]
        return SpeedMeasurement(first["label"] if first else result.label, estimates, result.control,
                                first["baseline_ms"] if first else result.baseline_ms)


METHODS = ("shipped", "random", "accuracy", "screened")
NO_OPENING = "-no-opening"


def run_one(method: str, context, config: SearchConfig, cache: Cache, seed: int, budget: int, folder: Path,
            screen: tuple[str, float | None] = ("loss-slope", None)):
    """One search of `budget` operator trials with seed `seed`, then the final stage; the run's figures."""
    cfg = dataclasses.replace(config, seed=seed, storage=f"sqlite:///{folder / f'{method}-{seed}.db'}",
                              study=f"{method}-{seed}", trials=budget)
    if method.endswith(NO_OPENING):
        method = method[: -len(NO_OPENING)]
        cfg = dataclasses.replace(cfg, opening="none")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}, each optionally + {NO_OPENING!r}")
    if method == "accuracy":
        cfg = dataclasses.replace(cfg, objective="accuracy")
    if method == "screened":
        cfg = dataclasses.replace(cfg, screen=screen[0], screen_threshold=screen[1])
    ctx = dataclasses.replace(context, config=cfg)
    cache.run_seed = seed
    study = open_study(cfg, ctx)
    # `budget` trials of the method's own, beside the opening's (counted in the study's --trials)
    total = budget + sum(V.OPENING in t.user_attrs for t in study.get_trials(deepcopy=False))
    if method == "random":
        for op in ctx.space.sample(budget, seed=seed, flops_bins=cfg.flops_bins):  # unrelated across seeds
            study.enqueue_trial({}, user_attrs={V.OPERATOR: op.to_json()})
    study.optimize(Objective(ctx, None, None, out=None), n_trials=remaining_trials(study, total),
                   catch=(Exception,), gc_after_trial=True)
    final = finalists.run_final_stage(study, ctx, out=None)
    return study, final


def figures(study: optuna.Study, final, budget: int, margin: float, target: float, chance: float, space) -> dict:
    ops = [t for t in study.trials  # a random run's last enqueued operators may be left waiting
           if not t.user_attrs.get(V.BASELINE) and t.state != optuna.trial.TrialState.WAITING]
    order = {t.number: i + 1 for i, t in enumerate(ops)}  # position among the run's operator trials
    qualifying = [f for f in (final.candidates if final else [])
                  if final.within(f) and f.speedup is not None and f.speedup >= target and f.trial in order]
    hits = [order[f.trial] for f in qualifying]
    opening = {t.number for t in ops if V.OPENING in t.user_attrs}
    searched = [h for f, h in zip(qualifying, hits) if f.trial not in opening]
    # a new operator: not a known form up to channel permutations (classify.py); its position among the method's
    # own trials (the opening's left out of the count, as the issue counts them)
    own = {t.number: i + 1 for i, t in enumerate(t for t in ops if t.number not in opening)}
    by_number = {t.number: t for t in ops}
    new = [f for f in qualifying if f.trial in own
           and classify(Operator.from_json(space, operator_json_of(by_number[f.trial]))) is None]
    new_hits = [own[f.trial] for f in new]
    within = [f.speedup for f in (final.candidates if final else []) if final.within(f) and f.speedup is not None]
    base = baseline_trial(study)
    points = [(-t.values[0], t.user_attrs[V.COST_RATIO]) for t in ops
              if t.state == optuna.trial.TrialState.COMPLETE and t.values and V.COST_RATIO in t.user_attrs]
    hv = {}
    for name, ref_acc in (("baseline", base.values[0] if base else None), ("chance", chance)):
        ref = np.array([-ref_acc, 1.0]) if ref_acc is not None else None
        inside = np.array([p for p in points if ref is not None and p[0] < ref[0] and p[1] < ref[1]])
        hv[name] = (float(optuna._hypervolume.compute_hypervolume(inside, ref)) if len(inside) else 0.0)
    return {"hit": min(hits) if hits else None, "searched_hit": min(searched) if searched else None,
            "new_hit": min(new_hits) if new_hits else None,
            "best_speedup": max(within) if within else None, "hv": hv,
            "complete": sum(t.state == optuna.trial.TrialState.COMPLETE for t in ops), "ops": len(ops),
            "screened": sum(V.SCREENED in t.user_attrs for t in ops),
            "verdict": final.verdict() if final else "(no final stage)",
            "best_search_acc": max((-p[0] for p in points), default=None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("digits", "mnist1d"), default="digits",
                        help="the embedded dataset (model, layers and budgets follow its defaults)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds --first-seed .. + --seeds - 1 (to split "
                        "a run over processes, each with its own --cache)")
    parser.add_argument("--budget", type=int, default=30, help="operator trials per run (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=3, help="search epochs per trial (the CLI's default)")
    parser.add_argument("--finalists", type=int, default=3)
    parser.add_argument("--final-seeds", type=int, default=3)
    parser.add_argument("--final-epochs", type=int, default=None, help="default: twice --epochs")
    parser.add_argument("--pruner", default="hyperband", help="the searches' --pruner (default: %(default)s)")
    parser.add_argument("--flops-bins", type=int, default=0, help="the searches' --flops-bins (and the random "
                        "method's): draws spread over FLOPs bands (default: %(default)s, uniform)")
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--speedup", type=float, default=1.3)
    parser.add_argument("--methods", default="shipped,random,accuracy,shipped-no-opening,random-no-opening",
                        help=f"comma-separated: {', '.join(METHODS)}, each optionally + {NO_OPENING!r}")
    parser.add_argument("--screen", default="loss-slope", help="the screen of the 'screened' method")
    parser.add_argument("--screen-threshold", type=float, default=None, help="default: the screen's own")
    parser.add_argument("--cache", help="default: syno-bench-discovery-cache-<dataset>.json in the temp folder")
    args = parser.parse_args()
    args.cache = args.cache or os.path.join(tempfile.gettempdir(), f"syno-bench-discovery-cache-{args.dataset}.json")

    cache = Cache(Path(args.cache))
    training.train_operator = cache.train  # Objective and the final stage's retrain() read the module's
    finalists.measure_speedups = cache.measure
    config = SearchConfig(dataset=args.dataset, epochs=args.epochs, tracking_uri=None, heartbeat=None,
                          finalists=args.finalists, pruner=args.pruner, flops_bins=args.flops_bins,
                          final_seeds=args.final_seeds, final_epochs=args.final_epochs, final_margin=args.margin,
                          speed_process="same")   # the final stage's timing through the cache (in this process)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    started = time.time()
    context = prepare(config)  # one context (one example batch, one space) for every run: caching needs it
    chance = 1.0 / max(context.num_classes, 2)
    folder = Path(tempfile.mkdtemp(prefix="syno-discovery-"))
    print(f"discovery on {args.dataset} ({config.model}): {args.seeds} seeds x {args.budget} operator trials, "
          f"methods {', '.join(methods)}; search "
          f"{config.epochs} epochs/trial, pruner {config.pruner}, final stage {args.finalists} finalists x "
          f"{args.final_seeds} seeds x {task_of(config).final_budget(config)[0]} epochs; hit = speedup >= "
          f"{args.speedup}x at <= {args.margin * 100:g} pp (cache {args.cache})", flush=True)
    rows: dict[str, list[dict]] = {m: [] for m in methods}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for method in methods:
            t0 = time.time()
            study, final = run_one(method, context, config, cache, seed, args.budget, folder,
                                   (args.screen, args.screen_threshold))
            r = figures(study, final, args.budget, args.margin, args.speedup, chance, context.space)
            rows[method].append(r)
            best = f"{r['best_speedup']:.2f}x" if r["best_speedup"] else "-"
            screened = f" ({r['screened']} screened)" if r["screened"] else ""
            print(f"  {method:18} seed {seed}: hit {r['hit'] or '>' + str(args.budget)} (searched "
                  f"{r['searched_hit'] or '>' + str(args.budget)}, new {r['new_hit'] or '>' + str(args.budget)}), "
                  f"best speedup within "
                  f"{args.margin * 100:g} pp {best}, {r['complete']}/{r['ops']} complete{screened}, best search acc "
                  f"{r['best_search_acc'] or 0:.3f}, HV(base) {r['hv']['baseline']:.4f} HV(chance) "
                  f"{r['hv']['chance']:.4f} ({time.time() - t0:.0f} s)\n      {r['verdict']}", flush=True)
    print(f"\n{time.time() - started:.0f} s in all; {cache.trained} trainings ({cache.train_s:.0f} s), "
          f"{cache.replayed} replayed from the cache\n")
    def median_hit(rs: list[dict], key: str) -> str:
        med = statistics.median(r[key] if r[key] else args.budget + 1 for r in rs)
        return f"{med:g}" if med <= args.budget else f">{args.budget}"

    print("| method | median trials to hit | seeds finding one | of them by the method itself: median trials, seeds "
          "| a new operator (not a known form): median trials, seeds "
          "| best speedup ≤ margin (median) | HV ref baseline (mean) | HV ref chance (mean) | trained (mean) |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for method, rs in rows.items():
        sp = [r["best_speedup"] for r in rs if r["best_speedup"]]
        print(f"| {method} | {median_hit(rs, 'hit')} | {sum(r['hit'] is not None for r in rs)}/{len(rs)} | "
              f"{median_hit(rs, 'searched_hit')}, {sum(r['searched_hit'] is not None for r in rs)}/{len(rs)} | "
              f"{median_hit(rs, 'new_hit')}, {sum(r['new_hit'] is not None for r in rs)}/{len(rs)} | "
              f"{f'{statistics.median(sp):.2f}x' if sp else '-'} | "
              f"{statistics.fmean(r['hv']['baseline'] for r in rs):.4f} | "
              f"{statistics.fmean(r['hv']['chance'] for r in rs):.4f} | "
              f"{statistics.fmean(r['ops'] - r['screened'] for r in rs):.1f} |")


if __name__ == "__main__":
    main()
