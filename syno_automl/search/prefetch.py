"""The background prefetch of the search tree's next decisions: its threads, their registry, and its rollouts'
place beside the timings.

While a trial is evaluated, a snapshot of the tree (mcts.MCTS.prefetch: the statistics as they are, the trial just
proposed running) runs the next decisions in a daemon thread, so that their rollouts (the expensive part of a
decision) are memoized when the real decision comes; the memo is a pure function of the leaf, so what any decision
proposes is unchanged, only how long it takes. A prefetch's rollout runs between timings
(runtime.timing_signal: a model timed on this machine would share its cores with it), and it stops at its next
rollout not yet memoized once its stop signal is set (the decision it prepares has begun), or at exit
(:func:`stop_prefetches`).
"""
from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from syno_automl.errors import SynoError
from syno_automl.runtime.timing_signal import between_timings

if TYPE_CHECKING:
    from syno_automl.search.mcts import MCTS, Observation

__all__ = ["Stopped", "rollout_slot", "start", "stop_prefetches"]

_THREAD_NAME = "syno-mcts-prefetch"
_JOIN_S = 120.0   # a prefetch's native call is a few hundred descents at most: it returns long before this

_prefetches: set[tuple[threading.Thread, threading.Event]] = set()  # running: (thread, its stop signal)
_prefetches_lock = threading.Lock()


class Stopped(SynoError):
    """A prefetch was told to stop (the decision it prepares has begun)."""


@contextlib.contextmanager
def rollout_slot(stop: threading.Event) -> Iterator[None]:
    """A prefetch's rollout: it waits while a timing is in progress; Stopped when told to stop first."""
    with between_timings(stop) as admitted:
        if not admitted:
            raise Stopped
        yield


def start(tree: MCTS, decision: int, running: Sequence[Observation], taken: Iterable[str], dead: Iterable[str],
          stop: threading.Event, ahead: int) -> threading.Thread:
    """Runs `tree` (a snapshot with `stop` as its stop signal) on decisions `decision` .. `decision + ahead - 1`
    in a registered daemon thread, each with the operators proposed before it running and the nodes found dead
    before it dead; the look-ahead ends at a decision that samples the whole space (a fallback)."""
    running, taken, dead = list(running), set(taken), set(dead)

    def run() -> None:
        try:
            for k in range(ahead):
                proposal = tree.propose(decision + k, running, taken, dead)
                if proposal.fallback:
                    break
                running.append(proposal.running())
                taken.add(proposal.operator.hash)
                dead.update(proposal.dead)
        except Exception:  # noqa: BLE001 -- stopped, or anything the real decision will meet and report
            pass
        finally:
            with _prefetches_lock:
                _prefetches.discard(entry)

    thread = threading.Thread(target=run, name=_THREAD_NAME, daemon=True)
    entry = (thread, stop)
    with _prefetches_lock:
        _prefetches.add(entry)
    thread.start()
    return thread


@atexit.register
def stop_prefetches() -> None:
    """Stops the running prefetches and waits for their space.sample call to return: when a search's trials are
    done (its final stage times models: no sampling beside it), and at exit, where a native call that returns
    while the interpreter finalizes aborts the process (pybind11 retaking the GIL: "terminate called without an
    active exception"). A prefetch samples rollouts only, each a few hundred descents at most."""
    with _prefetches_lock:
        running = list(_prefetches)
    for _, stop in running:
        stop.set()
    for thread, _ in running:
        thread.join(timeout=_JOIN_S)
