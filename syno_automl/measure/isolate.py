"""One child-process runner with a hard timeout, for kernels and models alike.

``python -m syno_automl.measure.isolate <kind> <job> <result.json>`` runs one measurement (``kind``: ``kernel``,
see :func:`syno_automl.measure.kernel.run_job`, or ``model``, :func:`syno_automl.measure.model.run_job`) in a new
session; :func:`run_child` kills it after ``seconds`` plus a grace period and reads back the :class:`Latency` it
wrote. It also shields the caller from crashes inside TVM. The child runs in its own session (so that a timeout
kills its compile workers with it) and therefore does not get the caller's signals: it watches its parent
(:func:`die_with_parent`) and kills its session when the caller is gone, so a killed benchmark or search leaves no
tuning running behind it.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

from syno_automl.measure.result import Latency

__all__ = ["run_child", "die_with_parent", "KINDS"]

KINDS = {"kernel": "syno_automl.measure.kernel", "model": "syno_automl.measure.model"}
_PARENT_ENV = "SYNO_ISOLATE_PARENT"   # the caller's pid: the child may start after the caller died
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(kind: str, job: str, out_path: str, name: str, seconds: float | None, grace: float) -> Latency:
    """The ``kind`` measurement described by ``job`` in a child process, killed after ``seconds + grace`` (no
    limit without ``seconds``); the :class:`Latency` it wrote as JSON to ``out_path``, or why there is none."""
    limit = (seconds + grace) if seconds is not None else None
    env = dict(os.environ)
    env[_PARENT_ENV] = str(os.getpid())
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", __name__, kind, job, out_path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        return Latency.failed(name, f"timeout: child killed after {limit:g} s (budget {seconds} s + {grace} s grace)")
    except BaseException:  # Ctrl-C or an exception in the caller: the child's tuning must not outlive it
        _kill_session(proc)
        raise
    if proc.returncode != 0 or not os.path.exists(out_path):
        tail = (err or b"").decode(errors="replace").strip().splitlines()[-3:]
        return Latency.failed(name, f"child exited with {proc.returncode}: {' | '.join(tail)}")
    with open(out_path) as f:
        return Latency.from_dict(json.load(f))


def _kill_session(proc: subprocess.Popen) -> None:
    # the whole session: the child's compile worker (compile_worker.py) too, which may be mid-compile
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.communicate()


def die_with_parent(parent_pid: int, interval: float = 1.0) -> threading.Thread:
    """Starts a daemon thread that kills this process's session once `parent_pid` is no longer its parent (the
    parent died, even by SIGKILL, and this process was re-parented). Returns the thread."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="die-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    die_with_parent(int(os.environ.get(_PARENT_ENV) or os.getppid()))
    kind, job, out_path = argv
    lat = importlib.import_module(KINDS[kind]).run_job(job)
    with open(out_path, "w") as f:
        json.dump(lat.to_dict(), f)
    return 0


if __name__ == "__main__":  # the child of run_child
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception:  # noqa: BLE001 -- the child reports any failure as its exit code
        traceback.print_exc()
        sys.exit(3)
