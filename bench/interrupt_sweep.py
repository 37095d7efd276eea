"""Every Ctrl-C and SIGTERM stops a search: a sweep of signals over a default search (issue 34, items 1 and 2).

    nice python bench/interrupt_sweep.py [--runs 20] [--signals INT,TERM] [--deadline 5] [-- SEARCH ARGS...]

The search is ``syno-automl search`` with small settings (by default ``--trials 4 --epochs 2 --final-seeds 1
--final-epochs 2``: the default task, space, objective, pruner and final stage, shortened), each run in a fresh
temporary folder. A first run without a signal gives the timeline (when each output line appears); the signal
points are spread evenly over it, from just before the study opens to its last line (loading, inside trials,
between them, in the final stage). A point is "D s after output line K": the next runs send the signal when their
own line K has appeared and D seconds, scaled by the run's pace so far (its line K's time over the reference's), have
passed, so that the points follow the search's phases on a machine whose load changes. A run that ends before its
point is run again with the point placed at the same fraction of the gap after line K that run showed (twice at
most).

For each signal (SIGINT, then SIGTERM) and each of the ``--runs`` points, a run is started, signalled once, and
checked:

* it exits with 128 + the signal (130, 143) within ``--deadline`` seconds of the signal;
* nothing is left RUNNING in the Optuna study (trials) or in MLflow (runs), read from the SQLite files;
* ``--resume`` (or the search again, when the signal came before the study existed) exits 0 with nothing RUNNING,
  and the study holds the final stage's verdict (when the search has one).

Prints a table (one row per run) and a summary line; the exit status is 1 when a run failed a check.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SMALL = ["--trials", "4", "--epochs", "2", "--final-seeds", "1", "--final-epochs", "2"]
RESUME_TIMEOUT_S = 900.0


@dataclass
class Lines:
    """A process's stdout lines, each with the seconds since its start, read by a thread."""
    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)

    def follow(self, stream) -> threading.Thread:  # noqa: ANN001 - a text stream
        def read() -> None:
            for line in stream:
                self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread


@dataclass
class Point:
    anchor: int      # index of the output line it follows
    delay: float     # seconds after that line, in the reference run
    gap: float       # seconds from that line to the next one (or to the end), in the reference run
    label: str       # that line, short


@dataclass
class Outcome:
    signal: str
    point: Point
    sent_at: float | None = None
    attempts: int = 0
    exit_code: int | None = None
    exit_s: float | None = None           # from the signal to the exit
    left: str = ""                        # RUNNING after the stop: "trials [..] runs [..]"
    lost_in_finalizer: bool = False       # stderr has "Exception ignored": a KeyboardInterrupt a finalizer lost
    resumed: int | None = None
    resume_left: str = ""
    verdict: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _start(folder: Path, args: list[str]) -> tuple[subprocess.Popen, Lines, object]:
    err = open(folder / "stderr.txt", "w")   # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", "search", *args], cwd=folder, env=_env(),
                            stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
                            # Ctrl-C raises in the child as in a terminal, even when this script runs in the
                            # background of a shell that ignores it for its jobs
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = Lines(time.monotonic())
    lines.follow(proc.stdout)
    return proc, lines, err


def _short(line: str) -> str:
    line = line.strip()
    if line.startswith("syno-automl: starting") or line.startswith("syno-automl: resuming"):
        return "loading"
    if line.startswith("syno-automl: study"):
        return "study opened"
    if "] trial " in line:
        return "after trial " + line.split("] trial ")[1].split()[0]
    if line.startswith("final stage:"):
        return "final stage begins"
    if line.startswith("final "):
        parts = line.split()
        return f"final {parts[1][:8]} seed {parts[3]}" if len(parts) > 3 else "final"
    return line[:24]


def reference(args: list[str], runs: int) -> tuple[list[Point], float]:
    """The timeline of a run without a signal, and `runs` points spread evenly over it."""
    with tempfile.TemporaryDirectory(prefix="sweep-ref-") as tmp:
        proc, lines, err = _start(Path(tmp), args)
        code = proc.wait()
        err.close()
        total = time.monotonic() - lines.started
        time.sleep(0.2)
        if code != 0:
            raise SystemExit(f"the reference search failed ({code}): {(Path(tmp) / 'stderr.txt').read_text()[-2000:]}")
    timeline = lines.lines
    opened = next((t for t, line in timeline if line.startswith("syno-automl: study")), timeline[0][0])
    last = timeline[-1][0]
    begin = max(timeline[0][0], opened - 1.0)
    points = []
    for i in range(runs):
        at = begin + (last - begin) * (i + 0.5) / runs
        anchor = max(k for k, (t, _) in enumerate(timeline) if t <= at)
        following = timeline[anchor + 1][0] if anchor + 1 < len(timeline) else total
        points.append(Point(anchor, round(at - timeline[anchor][0], 2), following - timeline[anchor][0],
                            _short(timeline[anchor][1])))
    print(f"reference run: {total:.0f} s, {len(timeline)} output lines; study opened at {opened:.1f} s, last line "
          f"at {last:.1f} s", flush=True)
    return points, timeline


def _running(folder: Path) -> str:
    """What is RUNNING in the folder's Optuna study and MLflow store ('' when nothing)."""
    found = []
    for db, query, what in (("syno.db", "SELECT number FROM trials WHERE state = 'RUNNING'", "trials"),
                            ("mlflow.db", "SELECT name FROM runs WHERE status = 'RUNNING'", "runs")):
        if (folder / db).exists():
            with sqlite3.connect(folder / db, timeout=30) as con:
                try:
                    rows = [str(r[0]) for r in con.execute(query)]
                except sqlite3.OperationalError:   # not created yet
                    rows = []
            if rows:
                found.append(f"{what} {','.join(rows)}")
    return " ".join(found)


def _study_exists(folder: Path) -> bool:
    if not (folder / "syno.db").exists():
        return False
    with sqlite3.connect(folder / "syno.db", timeout=30) as con:
        try:
            return bool(con.execute("SELECT count(*) FROM studies").fetchone()[0])
        except sqlite3.OperationalError:
            return False


def _has_verdict(folder: Path) -> bool:
    with sqlite3.connect(folder / "syno.db", timeout=30) as con:
        return bool(con.execute("SELECT count(*) FROM study_user_attributes WHERE key = 'syno.final'").fetchone()[0])


def _signal_at(proc: subprocess.Popen, lines: Lines, signum: int, point: Point, reference: list[tuple[float, str]],
               gap: float | None) -> float | None:
    """Sends `signum` at `point` (`gap`: the gap after the anchor line as a previous attempt showed it, else the
    reference's delay scaled by the run's pace); returns when (seconds since the start), None when it ended first."""
    while proc.poll() is None:
        if len(lines.lines) > point.anchor:
            anchored = lines.lines[point.anchor][0]
            if gap is not None:
                delay = gap * point.delay / max(point.gap, 1e-3)
            else:
                pace = anchored / reference[point.anchor][0] if reference[point.anchor][0] > 0 else 1.0
                delay = point.delay * min(3.0, max(0.3, pace))
            if time.monotonic() - lines.started >= anchored + delay:
                os.kill(proc.pid, signum)
                return time.monotonic() - lines.started
        time.sleep(0.01)
    return None


def one(args: list[str], signum: int, point: Point, reference: list[tuple[float, str]], deadline: float,
        final_stage: bool) -> Outcome:
    out = Outcome(signal.Signals(signum).name, point)
    with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
        folder = Path(tmp)
        gap = None
        for attempt in range(3):
            for old in folder.iterdir():   # a fresh search: what an earlier attempt left is removed
                shutil.rmtree(old) if old.is_dir() else old.unlink()
            out.attempts = attempt + 1
            proc, lines, err = _start(folder, args)
            out.sent_at = _signal_at(proc, lines, signum, point, reference, gap)
            if out.sent_at is not None:
                break
            proc.wait()
            err.close()
            time.sleep(0.2)   # the last lines read
            ended = time.monotonic() - lines.started
            if len(lines.lines) > point.anchor:   # the gap after the anchor line, as this run showed it
                following = [t for t, _ in lines.lines[point.anchor + 1:]]
                gap = 0.9 * ((following[0] if following else ended) - lines.lines[point.anchor][0])
        if out.sent_at is None:
            out.problems.append("ended before the point (3 attempts)")
        else:
            try:
                proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                out.problems.append(f"still running {deadline:g} s after the signal")
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            out.exit_s = time.monotonic() - lines.started - out.sent_at
        err.close()
        out.exit_code = proc.returncode
        if out.sent_at is not None and proc.returncode != 128 + signum:
            out.problems.append(f"exit {proc.returncode}, not {128 + signum}")
        stderr = (folder / "stderr.txt").read_text(errors="replace")
        out.lost_in_finalizer = "Exception ignored" in stderr and "KeyboardInterrupt" in stderr
        out.left = _running(folder)
        if out.left:
            out.problems.append(f"left RUNNING: {out.left}")
        again = [*args, "--resume"] if _study_exists(folder) else args
        done = subprocess.run([sys.executable, "-m", "syno_automl.cli", "search", *again, "-q"], cwd=folder,
                              env=_env(), capture_output=True, text=True, timeout=RESUME_TIMEOUT_S)
        out.resumed = done.returncode
        if done.returncode != 0:
            out.problems.append(f"--resume exit {done.returncode}: {done.stderr.strip()[-200:]}")
        out.resume_left = _running(folder)
        if out.resume_left:
            out.problems.append(f"RUNNING after --resume: {out.resume_left}")
        out.verdict = _study_exists(folder) and (not final_stage or _has_verdict(folder))
        if not out.verdict:
            out.problems.append("no final verdict after --resume")
    return out


def _row(i: int, o: Outcome) -> str:
    sent = (f"{o.sent_at:6.1f}" if o.sent_at is not None else "     -") + ("*" if o.attempts > 1 else " ")
    exit_s = f"{o.exit_s:5.2f}" if o.exit_s is not None else "    -"
    point = f"{o.point.delay:4.2f} s after {o.point.label}"
    return (f"{i:>3}  {o.signal:<7}  {point:<36}  {sent}  {str(o.exit_code):>4}  {exit_s}  "
            f"{'yes' if o.lost_in_finalizer else 'no':>5}  {o.left or '-':<10}  {str(o.resumed):>6}  "
            f"{o.resume_left or '-':<10}  {'ok' if o.ok else 'FAIL: ' + '; '.join(o.problems)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="signal points per signal (default: %(default)s)")
    parser.add_argument("--signals", default="INT,TERM", help="comma list of INT, TERM (default: %(default)s)")
    parser.add_argument("--deadline", type=float, default=5.0,
                        help="seconds from the signal to the exit (default: %(default)s)")
    parser.add_argument("search", nargs="*", help="search arguments after -- (default: " + " ".join(SMALL) + ")")
    opts = parser.parse_args()
    args = opts.search or SMALL
    final_stage = not any(a == "--finalists" and b == "0" for a, b in zip(args, args[1:]))
    signums = [getattr(signal, "SIG" + name.strip().upper()) for name in opts.signals.split(",")]
    started = time.time()
    print(f"interrupt sweep: syno-automl search {' '.join(args)}; {opts.runs} points x "
          f"{', '.join(signal.Signals(s).name for s in signums)}", flush=True)
    points, timeline = reference(args, opts.runs)
    print("columns: the point; when the signal was sent (s since the start; * placed again); the exit status and "
          "the seconds from the signal to the exit; lost: a KeyboardInterrupt was lost in a finalizer (\"Exception "
          "ignored\") on the way; what was RUNNING after the stop (trials of syno.db, runs of mlflow.db); --resume's "
          "exit status and what was RUNNING after it", flush=True)
    print(f"{'run':>3}  {'signal':<7}  {'point (in the reference run)':<36}  {'sent':>7}  {'exit':>4}  {'in s':>5}  "
          f"{'lost':>5}  {'RUNNING':<10}  {'resume':>6}  {'RUNNING':<10}  result", flush=True)
    outcomes: list[Outcome] = []
    for signum in signums:
        for point in points:
            outcome = one(args, signum, point, timeline, opts.deadline, final_stage)
            outcomes.append(outcome)
            print(_row(len(outcomes), outcome), flush=True)
    parts = []
    for signum in signums:
        mine = [o for o in outcomes if o.signal == signal.Signals(signum).name]
        times = [o.exit_s for o in mine if o.exit_s is not None]
        parts.append(f"{signal.Signals(signum).name} {sum(o.ok for o in mine)}/{len(mine)} ok "
                     f"(exit {128 + signum}; seconds to exit median {sorted(times)[len(times) // 2]:.2f}, "
                     f"max {max(times):.2f})" if times else f"{signal.Signals(signum).name}: none sent")
    lost = sum(o.lost_in_finalizer for o in outcomes)
    resumed = sum(o.resumed == 0 and not o.resume_left and o.verdict for o in outcomes)
    print(f"summary: {'; '.join(parts)}; --resume completed {resumed}/{len(outcomes)} with nothing RUNNING; "
          f"{lost} signal(s) landed in a finalizer (\"Exception ignored\") and still stopped the search; "
          f"{sum(o.attempts > 1 for o in outcomes)} point(s) placed again (*: the run ended before it); "
          f"{(time.time() - started) / 60:.0f} min", flush=True)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
