"""Speed reliability (issue 32): does the speed protocol agree with itself? Each operator's whole-model speedup is
measured twice, as the final stage measures it (its sessions, each a fresh process, pooled), while a third
process keeps one core busy; the runs (--runs, 2 by default) are compared.

Operators: --default-ops in-budget operators of the default space (small CNN on digits, as ``syno-automl search``
builds it) and --resnet-ops of ResNet-18 at 16x16 (both drawn with ``space.sample(n, seed)``: in budget by
construction). Each session is a fresh process (``--worker``) that prepares the same context, rebuilds the
operators from their JSON and times every one against the original model by
``syno_automl.speed.probe.measure_speedups`` with the final stage's session protocol (interleaved blocks, the
operators taking turns); a run pools its --sessions sessions by ``syno_automl.speed.sessions.pool_measurements``,
as the final stage does (a ratio with its 95 % reproducibility interval) on --target. So one run is 2 processes by
default, and the two runs 4.

Printed per setting and over all, over every pair of runs: test-retest Spearman of the runs' ratios, the median
|log ratio difference|, the share of operators whose each run's interval holds the other run's value (coverage);
the common shift (the standard deviation over runs of a run's mean log ratio: what moves every operator alike from
one run to the next, which the final stage's interval takes from ``RUN_DRIFT``); and the control's interval (the
original against itself) per run. Figures only, nothing asserted; the issue's bar: Spearman >= 0.9,
median |log diff| <= 3 %, coverage >= 90 %.

    nice -n 5 python bench/speed_reliability.py                      # 24 default + 12 ResNet-18 operators
    python bench/speed_reliability.py --default-ops 6 --resnet-ops 0 --no-load   # a quick look
    python bench/speed_reliability.py --from-saved F --target cuda.eager --drift 0.024   # a --save file's figures
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SETTINGS = {  # name -> SearchConfig keyword arguments
    "default": {},
    "resnet18-16": {"model": "resnet18", "image_size": 16},
}


def _config(setting: str, target: str, precision: str = "32") -> Any:
    from syno_automl.config import SearchConfig

    return SearchConfig(tracking_uri=None, speed_target=target, precision=precision, **SETTINGS[setting])


def worker(spec_path: Path, out_path: Path) -> None:
    """One run: prepare the setting's context, time each operator of the spec, write the estimates."""
    from dataclasses import replace

    from syno_automl.runtime.process import configure_process
    from syno_automl.space import Operator
    from syno_automl.speed.probe import measure_speedups
    from syno_automl.speed.sessions import SESSION_PROTOCOL
    from syno_automl.study import prepare

    spec = json.loads(spec_path.read_text())
    protocol = replace(SESSION_PROTOCOL, **spec.get("protocol", {}))
    configure_process(threads=1)   # a worker is an entry point: one thread, the steady allocator
    context = prepare(_config(spec["setting"], spec["target"], spec["precision"]))
    ops = [Operator.from_json(context.space, text) for text in spec["ops"]]
    started = time.time()
    speed = measure_speedups(context.speed_subject(), ops, threads=1, protocol=protocol)
    out_path.write_text(json.dumps({**speed.to_dict(), "seconds": time.time() - started}))


def _sample(setting: str, target: str, count: int, seed: int) -> list[str]:
    from syno_automl.study import prepare

    context = prepare(_config(setting, target))
    return [op.to_json() for op in context.space.sample(count, seed=seed)]


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(xs: list[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        out = [0.0] * len(xs)
        for rank, i in enumerate(order):
            out[i] = float(rank)
        return out
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else float("nan")


def _session(spec: Path, out: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, __file__, "--worker", str(spec), "--out", str(out)], check=True)
    return json.loads(out.read_text())


def _run(spec: Path, out: Path, sessions: int, target: str) -> dict[str, Any]:
    """One measurement as the final stage makes it: `sessions` fresh processes, one after another, pooled."""
    from syno_automl.runtime import parse_target
    from syno_automl.speed.probe import SpeedMeasurement
    from syno_automl.speed.process import FRESH_LABEL
    from syno_automl.speed.sessions import pool_measurements, run_drift

    found = [_session(spec, out.with_suffix(f".{k}.json")) for k in range(sessions)]
    measured = [SpeedMeasurement.from_dict(f) for f in found]
    for m in measured:
        m.label += FRESH_LABEL   # each session was a process of its own, as the final stage's
    speed_target = parse_target(target)
    pooled = pool_measurements(measured, speed_target)
    return {**pooled.to_dict(), "seconds": sum(f["seconds"] for f in found), "sessions": found,
            "drift": run_drift(speed_target)}


def with_drift(runs: list[dict[str, Any]], drift: float, saved_drift: float) -> list[dict[str, Any]]:
    """`runs` (as --save keeps them) with each operator's interval carrying the run drift `drift` instead of the one
    it was pooled with (the run's "drift", else `saved_drift`): the half-width in log ratio, less that drift's term
    in quadrature (``syno_automl.speed.pooled.drift_halfwidth``), plus the new one's. The figures and the
    controls do not move."""
    from syno_automl.speed.pooled import drift_halfwidth

    new = drift_halfwidth(drift)
    out = []
    for run in runs:
        old = drift_halfwidth(run.get("drift", saved_drift))
        estimates = []
        for e in run["estimates"]:
            if e is not None:
                half = math.hypot(math.sqrt(max(math.log(e["high"] / e["low"]) ** 2 / 4 - old ** 2, 0.0)), new)
                e = {**e, "low": e["ratio"] * math.exp(-half), "high": e["ratio"] * math.exp(half)}
            estimates.append(e)
        out.append({**run, "estimates": estimates, "drift": drift})
    return out


def _busy_core() -> subprocess.Popen:
    """A process that keeps one core busy until killed (the machine's load during the runs)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _shift(runs: list[dict[str, Any]]) -> float:
    """The standard deviation over runs of the run's mean log ratio (the operators measured in every run): a shift
    common to every operator between runs, which no interval from inside one run can see (R - 1 degrees of
    freedom; the operators' own noise, divided by their number, is a small part of it)."""
    ok = [i for i in range(len(runs[0]["estimates"])) if all(r["estimates"][i] for r in runs)]
    if len(runs) < 2 or not ok:
        return math.nan
    means = [statistics.fmean(math.log(r["estimates"][i]["ratio"]) for i in ok) for r in runs]
    return statistics.stdev(means)


def compare(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Test-retest figures over every pair of runs: Spearman (the median over pairs), the median |log ratio
    difference|, and coverage (each run's interval holding the other's figure, both ways, over all pairs)."""
    spearmans, diffs, held, checks = [], [], 0, 0
    for j in range(len(runs)):
        for k in range(j + 1, len(runs)):
            pairs = [(a, b) for a, b in zip(runs[j]["estimates"], runs[k]["estimates"]) if a and b]
            ra, rb = [a["ratio"] for a, _ in pairs], [b["ratio"] for _, b in pairs]
            if len(pairs) > 2:
                spearmans.append(_spearman(ra, rb))
            diffs += [abs(math.log(x / y)) for x, y in zip(ra, rb)]
            held += sum((a["low"] <= b["ratio"] <= a["high"]) + (b["low"] <= a["ratio"] <= b["high"])
                        for a, b in pairs)
            checks += 2 * len(pairs)
    estimates = [e for r in runs for e in r["estimates"] if e]
    row = {"setting": name, "operators": len(runs[0]["estimates"]),
           "spearman": statistics.median(spearmans) if spearmans else math.nan,
           "median_abs_log_diff": statistics.median(diffs) if diffs else math.nan,
           "coverage": held / checks if checks else math.nan,
           "pairs_median": statistics.median(e["pairs"] for e in estimates) if estimates else math.nan,
           "shift": _shift(runs)}
    controls = [r["control"] for r in runs if r.get("control")]
    row["controls"] = ", ".join(f"{c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}]" for c in controls)
    return row


def _row_text(r: dict[str, Any]) -> str:
    return (f"| {r['setting']} | {r['operators']} | {r['spearman']:.3f} | {100 * r['median_abs_log_diff']:.2f} % | "
            f"{100 * r['coverage']:.0f} % | {r['pairs_median']:.0f} | {100 * r['shift']:.2f} % | "
            f"{r.get('controls', '')} |")


def _with_all(rows: list[dict[str, Any]], per_setting: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """`rows` and the row over all settings (each run's estimates of every setting together)."""
    if not per_setting:
        return rows
    everything: list[dict[str, Any]] = [{"estimates": []} for _ in per_setting[0]]
    for runs in per_setting:
        for whole, run in zip(everything, runs):
            whole["estimates"] += run["estimates"]
    return [*rows, compare("all", everything)]


def _print_table(title: str, rows: list[dict[str, Any]]) -> None:
    print(title)
    print("| setting | operators | Spearman | median abs log diff | coverage | pairs (median) | common shift (sd) "
          "| controls |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(_row_text(r))


def _print_saved(args: argparse.Namespace) -> None:
    from syno_automl.runtime import parse_target
    from syno_automl.speed.sessions import run_drift

    drift = run_drift(parse_target(args.target)) if args.drift is None else args.drift
    saved = {setting: with_drift(runs, drift, args.saved_drift)
             for setting, runs in json.loads(args.from_saved.read_text()).items()}
    rows = [compare(setting, runs) for setting, runs in saved.items()]
    _print_table(f"speed reliability of {args.from_saved}, the operators' intervals carrying a run drift of "
                 f"{100 * drift:.2f} %:", _with_all(rows, list(saved.values())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--default-ops", type=int, default=24)
    ap.add_argument("--resnet-ops", type=int, default=12)
    ap.add_argument("--target", default="cpu.eager")
    ap.add_argument("--precision", default="32",
                    help="the training precision setting: 32, bf16-mixed (timed under autocast)")
    ap.add_argument("--seed", type=int, default=7, help="the operators' sample seed")
    ap.add_argument("--no-load", action="store_true", help="no third process keeping a core busy")
    ap.add_argument("--batch-pairs", type=int, help="the protocol's pairs per batch (default: the shipped one's)")
    ap.add_argument("--sessions", type=int, default=None,
                    help="sessions (fresh processes) per run, pooled (default: the final stage's)")
    ap.add_argument("--runs", type=int, default=2, help="runs per setting, one after another (default 2)")
    ap.add_argument("--save", type=Path, help="write every run's estimates and sessions per setting (JSON) here")
    ap.add_argument("--from-saved", type=Path, help="no measuring: the figures of a --save file, the operators' "
                    "intervals carrying --drift")
    ap.add_argument("--drift", type=float, help="with --from-saved: the run drift (default: the shipped one of "
                    "--target's device)")
    ap.add_argument("--saved-drift", type=float, default=0.012, help="with --from-saved: the drift a file saved "
                    "before runs recorded theirs was pooled with (default: %(default)s, the CPU's)")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.out)
        return
    if args.from_saved is not None:
        _print_saved(args)
        return
    from syno_automl.speed.sessions import FINAL_SESSIONS

    sessions = args.sessions or FINAL_SESSIONS
    if args.runs < 2:
        ap.error("--runs must be 2 or more (the figures compare runs)")
    rows = []
    saved: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="syno_speed_") as tmp:
        for setting, count in (("default", args.default_ops), ("resnet18-16", args.resnet_ops)):
            if count <= 0:
                continue
            spec = Path(tmp) / f"{setting}.json"
            changes = {} if args.batch_pairs is None else {"batch_pairs": args.batch_pairs}
            spec.write_text(json.dumps({"setting": setting, "target": args.target, "precision": args.precision,
                                        "protocol": changes,
                                        "ops": _sample(setting, args.target, count, args.seed)}))
            hog = None if args.no_load else _busy_core()
            try:
                runs = [_run(spec, Path(tmp) / f"{setting}-{k}.json", sessions, args.target) for k in range(args.runs)]
            finally:
                if hog is not None:
                    hog.kill()
            rows.append(compare(setting, runs))
            saved[setting] = runs
            if args.save is not None:   # each setting as it ends: a run cut short keeps what it finished
                args.save.write_text(json.dumps(saved, indent=1))
            took = ", ".join(f"{r['seconds']:.0f}" for r in runs)
            print(f"{setting}: {runs[0]['label']}; runs took {took} s\n{_row_text(rows[-1])}", flush=True)
    load = "one core kept busy by a third process" if not args.no_load else "no added load"
    _print_table(f"\nspeed reliability on {args.target}, {args.runs} runs of {sessions} fresh processes each, {load} "
                 f"(load average now {os.getloadavg()[0]:.2f}):", _with_all(rows, list(saved.values())))
    print("bar: Spearman >= 0.9, median abs log diff <= 3 %, coverage >= 90 %")


if __name__ == "__main__":
    main()
