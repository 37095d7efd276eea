"""Density benchmark (issue 25): how many operators of a space are good, at the trial's length and the final
stage's, and how well the trial's value ranks them as the final stage does.

Operators: N drawn with ``space.sample(N, seed)`` from the space ``syno-automl search`` builds by default (small
CNN on digits, budgets as shipped; --dataset mnist1d: that dataset's defaults, a 1-D CNN with Conv1d layers),
or replayed from a JSON-lines file (--from-file: the ``json`` of each row with
``role`` = sample, e.g. ../shared/data/default_space_accuracy.jsonl; --only-final keeps the rows that file trained
at the final length too). Each operator and the baseline train once per (lr schedule, epochs, training seed) --
--trial-epochs (the trial's fidelity, default the search's) and --final-epochs (the final stage's, default twice
that), each with the whole schedule over its own length as the search and its final stage run them -- in
--workers processes of one torch thread; every evaluation is cached (--cache, JSON lines keyed by operator hash +
schedule + epochs + seed + lr + batch size) so that a rerun trains only what is missing.

Figures per schedule (all from the evaluations of this run's cache, nothing asserted):
  * the baseline at each length (mean over its seeds);
  * within-1-pp and within-3-pp density (share of operators at most 1 or 3 pp below the baseline of the same
    schedule and length), at each length, by FLOPs bin (FLOPs ratio vs the replaced layers);
  * Spearman(trial value, final accuracy) over the operators trained at both lengths, for the trial's val_acc and
    for its val_loss (negated: lower is better), and how many of the final stage's within-1-pp operators the
    trial's top 10 % hold;
  * with --trial-seeds K > 1: the sd of the trial's val_acc over seeds 0..K-1 for the first --noise-ops operators
    (the noise the finalist choice allows for: syno_automl.study.finalists).

--priors on|off|both: the space with the space priors on or off, where ``substitute`` takes ``priors=`` (checked
with inspect; otherwise the run says so and uses the space as it is). Sampled operators come from each space; a
replayed file is filtered by it (an operator the priors' space rejects is out of that space's figures).

    nice -n 10 python bench/density.py --count 60 --workers 2
    nice -n 10 python bench/density.py --dataset mnist1d --count 60 --workers 2 --priors on
    nice -n 10 python bench/density.py --from-file ../shared/data/default_space_accuracy.jsonl --only-final \\
        --schedules cosine,onecycle --workers 2
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

FLOPS_BINS = (0.0, 0.01, 0.1, 0.25, math.inf)
BASELINE = "baseline"
_CONTEXT: Any = None    # a worker's SearchContext (prepared once per process)


# -- evaluations and their cache -----------------------------------------------------------------------------
def job_key(op_hash: str, schedule: str, epochs: int, seed: int, lr: float, batch: int) -> str:
    return f"{op_hash}|{schedule}|e{epochs}|s{seed}|lr{lr:g}|b{batch}"


class Cache:
    """Evaluations as JSON lines, one per key; appended as each training ends (an interrupted run keeps them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    def add(self, row: dict[str, Any]) -> None:
        self.rows[row["key"]] = row
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


class _Run:
    """Collects what the training path logs to an MLflow run (per-epoch val_acc/val_loss) without MLflow."""

    def __init__(self) -> None:
        self.epochs: dict[int, dict[str, float]] = {}

    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        if step is not None:
            self.epochs.setdefault(step, {}).update({k: v for k, v in metrics.items() if v is not None})

    def log_torch(self, obj: Any, name: str) -> None:
        pass


def _init_worker(threads: int, dataset: str) -> None:
    global _CONTEXT
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    from syno_automl.config import SearchConfig
    from syno_automl.study.context import prepare

    _CONTEXT = prepare(SearchConfig(threads=threads, dataset=dataset))


def _train(job: dict[str, Any]) -> dict[str, Any]:
    """One evaluation in a worker: the search's own training path (study.training.train_operator)."""
    from syno_automl.space import Operator
    from syno_automl.study import training

    config = dataclasses.replace(_CONTEXT.config, seed=job["seed"], lr_schedule=job["schedule"], lr=job["lr"],
                                 batch_size=job["batch"])
    context = dataclasses.replace(_CONTEXT, config=config)
    op = Operator.from_json(context.space, job["json"]) if job["json"] else None
    run = _Run()
    started = time.time()
    row = {k: job[k] for k in ("key", "hash", "schedule", "epochs", "seed", "lr", "batch", "flops_ratio")}
    try:
        row["val_acc"] = training.train_operator(context, None, run, epochs=job["epochs"], operator=op,
                                                 milestones={}, timeout=None)
        row["error"] = None
    except Exception as e:  # noqa: BLE001 -- a failed training is a figure too (NaN loss, a slow operator)
        row["val_acc"], row["error"] = None, f"{type(e).__name__}: {e}"[:300]
    last = run.epochs.get(max(run.epochs), {}) if run.epochs else {}
    row["val_loss"] = last.get("val_loss")
    row["curve"] = [run.epochs[e].get("val_acc") for e in sorted(run.epochs)]
    row["wall_s"] = round(time.time() - started, 2)
    return row


def run_jobs(jobs: list[dict[str, Any]], cache: Cache, workers: int, out: Any = sys.stdout,
             dataset: str = "digits") -> None:
    todo = [j for j in jobs if j["key"] not in cache.rows]
    print(f"{len(jobs)} evaluations, {len(jobs) - len(todo)} cached, {len(todo)} to train", file=out, flush=True)
    if not todo:
        return
    started = time.time()
    # spawn: each worker imports torch afresh and prepares the search's context once
    with mp.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=(1, dataset)) as pool:
        for i, row in enumerate(pool.imap_unordered(_train, todo), 1):
            cache.add(row)
            if i % 10 == 0 or i == len(todo):
                print(f"  {i}/{len(todo)} trained ({time.time() - started:.0f} s)", file=out, flush=True)


# -- operators ----------------------------------------------------------------------------------------------
def priors_supported() -> bool:
    from syno_automl.placeholder import substitute

    return "priors" in inspect.signature(substitute).parameters


def space_of(context: Any, priors: bool | None) -> Any:
    """The default search's space, with the priors on/off where substitute takes them (None: as it is)."""
    if priors is None:
        return context.space
    from lightning_modules import build_model
    from syno_automl.placeholder import substitute
    from syno_automl.study.context import LAYERS, seed_everything

    seed_everything(context.config.seed)
    probe = build_model(context.config.model, context.num_classes, context.in_channels)
    options = {**context.budgets.substitute_options(), **context.space_options, "priors": priors}
    return substitute(probe, LAYERS[context.config.layer], context.example, check=False, **options).space


def file_rows(path: Path, only_final: bool) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    finals = {r["hash"] for r in rows if r.get("role") == "sample" and r.get("epochs") not in (None, 3)}
    seen: set[str] = set()
    out = []
    for r in rows:
        if r.get("role") != "sample" or not r.get("json") or r["hash"] in seen:
            continue
        if only_final and r["hash"] not in finals:
            continue
        seen.add(r["hash"])
        out.append(r)
    return out


def operators(space: Any, context: Any, args: argparse.Namespace, rows: list[dict[str, Any]] | None) -> list[Any]:
    """(hash, json, flops ratio) of the operators this space's figures cover."""
    from syno_automl.space import Operator

    if rows is None:
        ops = space.sample(args.count, seed=args.sample_seed)
    else:
        ops = []
        for r in rows:
            try:
                ops.append(Operator.from_json(space, r["json"]))
            except Exception:  # noqa: BLE001 -- outside this space (the priors reject it)
                continue
    return [(op.hash, op.to_json(), float(context.substitution.flops_ratio(op))) for op in ops]


# -- figures ------------------------------------------------------------------------------------------------
def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (ties: average ranks)."""
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else float("nan")


def bins(flops: float) -> str:
    for lo, hi in zip(FLOPS_BINS, FLOPS_BINS[1:]):
        if lo <= flops < hi:
            return f"[{lo:g}, {hi:g})"
    return "?"


def value(cache: Cache, key: str, field: str = "val_acc") -> float | None:
    row = cache.rows.get(key)
    return None if row is None or row.get(field) is None else float(row[field])


def report(cache: Cache, ops: list[tuple[str, str, float]], args: argparse.Namespace, schedule: str,
           label: str, out: Any = sys.stdout) -> dict[str, Any]:
    """The figures of one schedule over `ops` (printed; returned for tests)."""
    def key(h: str, epochs: int, seed: int = 0) -> str:
        return job_key(h, schedule, epochs, seed, args.lr, args.batch)

    base = {}
    for e in (args.trial_epochs, args.final_epochs):
        vs = [value(cache, key(BASELINE, e, s)) for s in range(args.baseline_seeds)]
        vs = [v for v in vs if v is not None]
        base[e] = sum(vs) / len(vs) if vs else None
    print(f"\n== {label}, lr schedule {schedule}: baseline {base[args.trial_epochs]:.4f} at {args.trial_epochs} "
          f"epochs, {base[args.final_epochs]:.4f} at {args.final_epochs}", file=out)
    print(f"  {'FLOPs bin':<14}{'n':>4}" + "".join(f"{f'{m} pp @{e}':>12}" for e in (args.trial_epochs,
          args.final_epochs) for m in (1, 3)), file=out)
    figures: dict[str, Any] = {"baseline": base, "bins": {}}
    groups: dict[str, list[str]] = {}
    for h, _, f in ops:
        groups.setdefault(bins(f), []).append(h)
    for name in [bins(lo) for lo in FLOPS_BINS[:-1]] + ["all"]:
        hs = [h for h, _, _ in ops] if name == "all" else groups.get(name, [])
        if not hs:
            continue
        cells = []
        for e in (args.trial_epochs, args.final_epochs):
            vs = [value(cache, key(h, e)) for h in hs]
            vs = [v if v is not None else 0.0 for v in vs]   # a failed training is not good
            for m in (0.01, 0.03):
                cells.append(sum(v >= base[e] - m for v in vs) / len(vs))
        figures["bins"][name] = (len(hs), cells)
        print(f"  {name:<14}{len(hs):>4}" + "".join(f"{c:>12.3f}" for c in cells), file=out)
    both = [h for h, _, _ in ops if value(cache, key(h, args.trial_epochs)) is not None
            and value(cache, key(h, args.final_epochs)) is not None]
    final = [value(cache, key(h, args.final_epochs)) for h in both]
    acc = [value(cache, key(h, args.trial_epochs)) for h in both]
    loss = [value(cache, key(h, args.trial_epochs), "val_loss") for h in both]
    figures["n"] = len(both)
    figures["spearman_acc"] = spearman(acc, final) if len(both) > 2 else float("nan")
    pairs = [(-lo, f) for lo, f in zip(loss, final) if lo is not None and math.isfinite(lo)]
    figures["spearman_loss"] = spearman(*map(list, zip(*pairs))) if len(pairs) > 2 else float("nan")
    good = {h for h, f in zip(both, final) if f >= base[args.final_epochs] - 0.01}
    top = sorted(both, key=lambda h: -value(cache, key(h, args.trial_epochs)))[:max(1, len(both) // 10)]
    figures["top_hold"] = (len(good & set(top)), len(good), len(top))
    print(f"  Spearman(trial val_acc, final val_acc) = {figures['spearman_acc']:.3f}; (trial -val_loss, final "
          f"val_acc) = {figures['spearman_loss']:.3f}  over {len(both)} operators; the trial's top {len(top)} hold "
          f"{figures['top_hold'][0]} of the {len(good)} within 1 pp at {args.final_epochs} epochs", file=out)
    sds = []
    for h, _, _ in ops[:args.noise_ops] if args.trial_seeds > 1 else []:
        vs = [value(cache, key(h, args.trial_epochs, s)) for s in range(args.trial_seeds)]
        if all(v is not None for v in vs):
            mean = sum(vs) / len(vs)
            sds.append(math.sqrt(sum((v - mean) ** 2 for v in vs) / (len(vs) - 1)))
    if sds:
        sds.sort()
        figures["trial_sd"] = (sds[len(sds) // 2], math.sqrt(sum(s * s for s in sds) / len(sds)))
        print(f"  trial val_acc sd over seeds 0..{args.trial_seeds - 1} ({len(sds)} operators): median "
              f"{figures['trial_sd'][0]:.4f}, pooled {figures['trial_sd'][1]:.4f}", file=out)
    return figures


def jobs_for(ops: list[tuple[str, str, float]], schedule: str, args: argparse.Namespace) -> Iterator[dict]:
    def job(h: str, text: str | None, flops: float, epochs: int, seed: int) -> dict[str, Any]:
        return {"key": job_key(h, schedule, epochs, seed, args.lr, args.batch), "hash": h, "json": text,
                "schedule": schedule, "epochs": epochs, "seed": seed, "lr": args.lr, "batch": args.batch,
                "flops_ratio": flops}

    for e in (args.trial_epochs, args.final_epochs):
        for s in range(args.baseline_seeds):
            yield job(BASELINE, None, 1.0, e, s)
    for i, (h, text, f) in enumerate(ops):
        yield job(h, text, f, args.trial_epochs, 0)
        for s in range(1, args.trial_seeds if i < args.noise_ops else 1):
            yield job(h, text, f, args.trial_epochs, s)
    for h, text, f in ops:   # the final length last: the trial figures come first when a run is cut short
        yield job(h, text, f, args.final_epochs, 0)


def main(argv: list[str] | None = None) -> None:
    from syno_automl.config import SearchConfig
    from syno_automl.settings import SETTING

    first = argparse.ArgumentParser(add_help=False)   # the dataset first: the other defaults follow it
    first.add_argument("--dataset", choices=("digits", "mnist1d"), default="digits",
                       help="the embedded dataset whose default search space is measured (model, layers and "
                       "budgets follow its defaults)")
    default = SearchConfig(dataset=first.parse_known_args(argv)[0].dataset)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], parents=[first])
    parser.add_argument("--count", type=int, default=60, help="operators sampled from each space")
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--from-file", type=Path, help="replay the operators of a JSON-lines file instead")
    parser.add_argument("--only-final", action="store_true", help="--from-file: the rows it trained at both lengths")
    parser.add_argument("--limit", type=int, help="--from-file: the first N operators")
    parser.add_argument("--schedules", default=default.lr_schedule,
                        help=f"comma list of {', '.join(SETTING['lr_schedule'].choices)}")
    parser.add_argument("--trial-epochs", type=int, default=default.epochs)
    parser.add_argument("--final-epochs", type=int, help="default twice --trial-epochs (the final stage's)")
    parser.add_argument("--lr", type=float, default=SETTING["lr"].default_for("image"))
    parser.add_argument("--batch", type=int, default=default.batch_size)
    parser.add_argument("--baseline-seeds", type=int, default=3)
    parser.add_argument("--trial-seeds", type=int, default=1, help="seeds of the trial's fidelity (noise)")
    parser.add_argument("--noise-ops", type=int, default=20, help="operators trained with --trial-seeds seeds")
    parser.add_argument("--priors", choices=("on", "off", "both"), default="both")
    parser.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--cache", type=Path, help="default: syno-bench-density-<dataset>.jsonl in the temp folder")
    args = parser.parse_args(argv)
    args.final_epochs = args.final_epochs or 2 * args.trial_epochs
    args.cache = args.cache or Path(tempfile.gettempdir()) / f"syno-bench-density-{args.dataset}.jsonl"
    schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    for s in schedules:
        SETTING["lr_schedule"].validate(s)

    from syno_automl.study.context import prepare

    started = time.time()
    context = prepare(SearchConfig(threads=1, dataset=args.dataset))
    cache = Cache(args.cache)
    rows = file_rows(args.from_file, args.only_final)[:args.limit] if args.from_file else None
    if priors_supported():
        settings = {"on": [True], "off": [False], "both": [False, True]}[args.priors]
    else:
        settings = [None]
        print(f"priors: this build's substitute takes no priors= argument: the space as it is "
              f"(--priors {args.priors} ignored)")
    spaces = [(p, operators(space_of(context, p), context, args, rows)) for p in settings]
    print(f"{args.dataset}, model {context.config.model}: operators: "
          f"{', '.join(f'{len(o)} (priors {_on(p)})' for p, o in spaces)}; "
          f"{args.trial_epochs} vs {args.final_epochs} epochs; cache {args.cache}", flush=True)
    every: dict[str, tuple[str, str, float]] = {h: (h, t, f) for _, ops in spaces for h, t, f in ops}
    for schedule in schedules:
        run_jobs(list(jobs_for(list(every.values()), schedule, args)), cache, args.workers, dataset=args.dataset)
    for schedule in schedules:
        for p, ops in spaces:
            report(cache, ops, args, schedule, f"priors {_on(p)}")
    print(f"\n{time.time() - started:.0f} s")


def _on(priors: bool | None) -> str:
    return "as built" if priors is None else ("on" if priors else "off")


if __name__ == "__main__":
    main()
