"""Screen benchmark (issue 14, point 4): does a cheap score of an operator predict how it trains?

Samples --count distinct operators from the default search's space (the space `syno-automl search` builds:
prepare(SearchConfig()), small CNN on digits at 8x8), scores each with the screens of syno_automl.study.screen
(loss-slope at --steps and at half of them, naswot) and trains each as a search trial does (--epochs epochs, the
trial's training path and time limit, no pruner), all with the search seed. Figures (nothing asserted):
  * Spearman rank correlation of each score with the trained val_acc (failed trainings ranked lowest, as 0.0);
  * the screen's median seconds, and as a ratio of the median full trial's training time measured in this run;
  * for a few thresholds per score: how many operators it rejects, the precision and recall of "rejects" against
    "bad" (val_acc < --bad, or the training failed), and how many good ones (val_acc >= --good) it rejects.
Every score is relative to the baseline model's, measured in the same run (loss-slope: the operator's loss drop
over the baseline's; naswot: the log-determinant minus the baseline's).

    nice -n 15 python bench/screen.py --count 60 --out /tmp/screen.json
    nice -n 15 python bench/screen.py --count 0 --studies '/tmp/syno-discovery-*/shipped-*.db'   # MCTS's proposals

--studies adds the operators that searches proposed (their studies' trials, e.g. bench/discovery.py's databases):
the MCTS concentrates on better operators than uniform sampling does. --cache (bench/discovery.py's, read only)
replays the val_acc of an operator trained there to completion with the same seed and epochs (its trial training,
pruner aside, is this one: same seed 0, same path); those operators' training seconds are not counted.
"""
from __future__ import annotations

import argparse
import glob
import json
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import optuna  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from syno_automl import vocabulary as V  # noqa: E402
from syno_automl.config import SearchConfig  # noqa: E402
from syno_automl.errors import OperatorFormatError  # noqa: E402
from syno_automl.space import Operator  # noqa: E402
from syno_automl.study import prepare  # noqa: E402
from syno_automl.study.screen import Screen  # noqa: E402
from syno_automl.study.training import train_operator  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
import lightning.pytorch  # noqa: E402,F401 - sets its loggers' levels on import: quiet them after

for _name in ("lightning", "lightning.pytorch", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.WARNING)

THRESHOLDS = {"loss-slope": (0.03, 0.05, 0.1, 0.2, 0.3), "naswot": (-60.0, -40.0, -30.0, -20.0, -10.0)}


def timed_train(context, op) -> tuple[float | None, float, str]:
    """(val_acc or None when the training failed, seconds, failure)."""
    started = time.perf_counter()
    try:
        value = train_operator(context, None, None, epochs=context.config.epochs, operator=op)
        return value, time.perf_counter() - started, ""
    except Exception as e:  # noqa: BLE001 - a failed trial is a figure here
        return None, time.perf_counter() - started, f"{type(e).__name__}: {e}"[:160]


def proposed(pattern: str, space) -> list[Operator]:
    """The operators held by the trials of every study in the SQLite files matching `pattern`."""
    ops: list[Operator] = []
    for path in sorted(glob.glob(pattern)):
        storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
        for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
            if summary.study_name.endswith(V.FIDELITY_SUFFIX):
                continue
            for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials:
                if isinstance(t.user_attrs.get(V.OPERATOR), str):
                    try:
                        ops.append(Operator.from_json(space, t.user_attrs[V.OPERATOR]))
                    except OperatorFormatError:  # a study of another space
                        continue
    return ops


def table(rows: list[dict], name: str, thresholds, bad: float, good: float) -> list[str]:
    lines = []
    is_bad = [r["val_acc"] is None or r["val_acc"] < bad for r in rows]
    is_good = [r["val_acc"] is not None and r["val_acc"] >= good for r in rows]
    for t in thresholds:
        rejected = [r["scores"][name] < t for r in rows]
        tp = sum(a and b for a, b in zip(rejected, is_bad))
        n_rej, n_bad = sum(rejected), sum(is_bad)
        lines.append(f"| {name} | {t:g} | {n_rej}/{len(rows)} | {tp / n_rej if n_rej else float('nan'):.2f} | "
                     f"{tp / n_bad if n_bad else float('nan'):.2f} | "
                     f"{sum(a and b for a, b in zip(rejected, is_good))}/{sum(is_good)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60, help="operators sampled (default: %(default)s)")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3, help="training epochs per operator (the CLI's default)")
    parser.add_argument("--steps", type=int, default=16, help="loss-slope steps (also scored at half of them)")
    parser.add_argument("--bad", type=float, default=0.5, help="val_acc below which an operator is bad")
    parser.add_argument("--good", type=float, default=0.7, help="val_acc from which an operator is good")
    parser.add_argument("--studies", default=None, help="glob of SQLite study files: add their trials' operators")
    parser.add_argument("--cache", default=None, help="bench/discovery.py's cache, read only (replays val_acc)")
    parser.add_argument("--out", default=None, help="JSON of every operator's figures")
    args = parser.parse_args()

    config = SearchConfig(epochs=args.epochs, tracking_uri=None, heartbeat=None)
    context = prepare(config)
    half = args.steps // 2
    screens = {f"loss-slope@{half}": Screen(context, "loss-slope", steps=half),
               f"loss-slope@{args.steps}": Screen(context, "loss-slope", steps=args.steps),
               "naswot": Screen(context, "naswot")}
    for screen in screens.values():
        screen.reference()  # the baseline's figure, once, outside the operators' timings
    base_acc, base_s, _ = timed_train(context, None)
    ops = context.space.sample(args.count, seed=args.sample_seed) if args.count else []
    if args.studies:
        ops += proposed(args.studies, context.space)
    ops = list({op.hash: op for op in ops}.values())
    print(f"screen: {len(ops)} operators of the default space ({args.count} sampled with seed {args.sample_seed}"
          + (f", the rest proposed in {args.studies}" if args.studies else "") + f"), {args.epochs} epochs "
          f"each; baseline val_acc {base_acc:.4f} in {base_s:.2f} s; bad < {args.bad}, good >= {args.good}", flush=True)
    cached = json.loads(Path(args.cache).read_text())["runs"] if args.cache else {}
    rows: list[dict] = []
    started = time.time()
    for i, op in enumerate(ops):
        scores, seconds, error = {}, {}, ""
        for name, screen in screens.items():
            t0 = time.perf_counter()
            try:
                scores[name] = screen.score(op, seed=config.seed).score
            except Exception as e:  # noqa: BLE001 - an operator that cannot be screened cannot be trained either
                scores[name], error = float("-inf"), f"{type(e).__name__}: {e}"[:160]
            seconds[name] = time.perf_counter() - t0
        hit = cached.get(f"{op.hash}|{args.epochs}|0", {})
        if hit.get("outcome") == "complete":
            value, train_s, failure = hit["value"], None, ""
        else:
            value, train_s, failure = timed_train(context, op)
        rows.append({"hash": op.hash, "val_acc": value, "train_s": train_s, "failure": failure,
                     "screen_error": error, "scores": scores, "seconds": seconds})
        print(f"  [{i + 1:>3}] {op.hash} val_acc {'failed' if value is None else f'{value:.3f}'} "
              f"({'cached' if train_s is None else f'{train_s:.1f} s'})  "
              + "  ".join(f"{k} {v:.3g}" for k, v in scores.items()), flush=True)
    trained = [r["train_s"] for r in rows if r["val_acc"] is not None and r["train_s"] is not None]
    med_train = statistics.median(trained) if trained else float("nan")
    accs = [r["val_acc"] if r["val_acc"] is not None else 0.0 for r in rows]
    print(f"\n{time.time() - started:.0f} s; {len(trained)}/{len(rows)} trained here, "
          f"{sum(r['train_s'] is None for r in rows)} replayed, "
          f"{sum(r['val_acc'] is None for r in rows)} failed; median trial training {med_train:.2f} s "
          f"(baseline {base_s:.2f} s); val_acc median {statistics.median(accs):.3f}, "
          f"{sum(a < args.bad for a in accs)} bad, {sum(a >= args.good for a in accs)} good\n")
    print("| score | Spearman ρ with val_acc | median screen s | screen / trial training time |\n|---|---:|---:|---:|")
    for name in screens:
        rho = spearmanr([r["scores"][name] for r in rows], accs).statistic
        sec = statistics.median(r["seconds"][name] for r in rows)
        print(f"| {name} | {rho:.3f} | {sec:.3f} | {sec / med_train:.3f} |")
    print("\n| score | threshold | rejected | precision (bad) | recall (bad) | good rejected |\n"
          "|---|---:|---:|---:|---:|---:|")
    for name, screen in screens.items():
        for line in table(rows, name, THRESHOLDS[screen.kind], args.bad, args.good):
            print(line)
    if args.out:
        Path(args.out).write_text(json.dumps({"baseline": {"val_acc": base_acc, "train_s": base_s}, "rows": rows},
                                             indent=1))


if __name__ == "__main__":
    main()
