"""The isolated measurement child does not outlive its caller (measure/isolate.py: die_with_parent)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from _syno_helpers import alive

# a caller that starts a child in a new session (as run_child does) which watches it, then sleeps; it prints the
# child's pid and the pid of the child's own worker (a grandchild in the same session, like the compile worker)
CALLER = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, subprocess, sys, time
from syno_automl.measure.isolate import die_with_parent
die_with_parent(int(sys.argv[1]), interval=0.05)
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(worker.pid, flush=True)
time.sleep(120)
''', str(os.getpid())], start_new_session=True, stdout=subprocess.PIPE, text=True)
worker = child.stdout.readline().strip()
print(child.pid, worker, flush=True)
time.sleep(120)
"""


def test_a_killed_caller_takes_the_isolated_child_and_its_workers_with_it():
    caller = subprocess.Popen([sys.executable, "-c", CALLER], stdout=subprocess.PIPE, text=True)
    child, worker = (int(p) for p in caller.stdout.readline().split())
    assert alive(child) and alive(worker)
    caller.send_signal(signal.SIGKILL)   # no handler can run: only the child's own watch can notice
    caller.wait()
    deadline = time.monotonic() + 60   # generous: the watch polls every 0.05 s, a loaded machine may lag
    while (alive(child) or alive(worker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = not alive(child) and not alive(worker)
    for pid in (child, worker):   # never leave them behind, whatever the outcome
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert gone, "the isolated child (or its worker) outlived its killed caller"


def test_a_living_caller_keeps_its_child():
    caller = subprocess.Popen([sys.executable, "-c", CALLER], stdout=subprocess.PIPE, text=True)
    try:
        child, worker = (int(p) for p in caller.stdout.readline().split())
        time.sleep(0.5)   # ten polls of the watch: it must not fire while the caller lives
        assert alive(child) and alive(worker)
    finally:
        caller.kill()
        caller.wait()
