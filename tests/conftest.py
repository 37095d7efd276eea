"""Shared test setup: one torch thread per test process, the final stage timed in-process, the heap frozen at each
file's start (and after a library's first import), and the longest files first."""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest
import torch

# The final stage times in the search's own process here: a fresh one costs ~8 s of start-up per final stage, and
# the suite runs dozens. tests/speed/test_speed_process.py runs the fresh one (the default) itself.
os.environ.setdefault("SYNO_AUTOML_SPEED_PROCESS", "same")
# Fast timing (runtime/timing_rigor.py): every speed figure in a few 5 ms pairs. Most tests check that figures are
# taken, carried and shown, not their precision; those that check a figure against another, or a protocol's own
# lengths, time standard (the `standard_timing` fixture).
os.environ.setdefault("SYNO_AUTOML_TIMING", "fast")

# The files that take longest (their tests' seconds, `pytest --durations=0`, file by file on a 2-core machine),
# longest first.
# scripts/test.sh runs two pytest-xdist workers by file in collection order (--no-loadscope-reorder): long files
# first, the many short ones after them fill whichever worker finishes early, so that the two end together instead
# of one running a long file alone at the end. A file not listed runs after these, in name order.
LONGEST_FIRST = (
    "test_interrupt_signals.py", "test_cli_search.py", "test_codegen_tvm.py", "test_ui_docs.py",
    "test_cli_workflow.py", "test_search_finalists.py", "test_trial_speed.py", "test_search_determinism.py",
    "test_report_figures.py", "test_measure_build_timeout.py", "test_cost_profile.py", "test_report_verdict.py",
    "test_search_optuna.py", "test_cli_tune.py", "test_cli_mnist1d.py", "test_search_pareto.py",
    "test_measure_operator.py", "test_placeholder.py", "test_codegen_triton.py", "test_accelerator.py",
    "test_process_settings.py", "test_space.py", "test_cli_reevaluate.py", "test_tasks_lm.py",
    "test_tvm_random_operators.py", "test_search_mcts.py", "test_screen.py", "test_interrupt_resume.py",
    "test_search_latency.py", "test_cost_bound.py", "test_exhausted_space.py", "test_gpu_window.py",
    "test_resume_requeue.py", "test_codegen_loader.py", "test_measure_torch.py", "test_early_refusals.py",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable: name order after


@pytest.fixture
def standard_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every protocol as written, in this test and the processes it starts (runtime/timing_rigor.py)."""
    monkeypatch.setenv("SYNO_AUTOML_TIMING", "standard")


# sys.modules' size at the last freeze (heap_frozen_per_file, imports_frozen)
_FROZEN_AT = [0]
# modules imported since then that are worth a freeze of their own: a library's first import (Lightning, MLflow,
# TVM: hundreds of modules, hundreds of thousands of objects), not a module or two
IMPORTS_WORTH_A_FREEZE = 300


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()
    _FROZEN_AT[0] = len(sys.modules)


@pytest.fixture(autouse=True, scope="module")
def heap_frozen_per_file():
    """What a test file starts with (modules, libraries, session state) out of the collector's full passes, as a
    search's process freezes its heap once its study is open (runtime/process.py), after a collection (the previous
    file's garbage is freed, not frozen). A search's process holds one search; a test worker runs hundreds, and
    every trial's collection (Optuna's gc_after_trial) and every automatic full pass walked all that the worker had
    made since its first search froze: ~250,000 objects, ~0.15 s a pass (~10 % of an in-process search file's
    CPU). Frozen objects are still freed when nothing refers to them; only a reference cycle among them never is,
    and these live as long as the worker."""
    _collect_and_freeze()
    yield


@pytest.fixture(autouse=True)
def imports_frozen():
    """The same once a test has imported a library the worker had not (a file's first search imports Lightning and
    MLflow): the next test starts with it frozen, not only the next file. (The file's module-scoped fixtures, made
    by then, are frozen with it: a reference cycle among them would outlive the file; this happens a few times a
    worker.)"""
    if len(sys.modules) - _FROZEN_AT[0] >= IMPORTS_WORTH_A_FREEZE:
        _collect_and_freeze()
    yield


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """One intra-op thread: on a busy 2-core machine, two threads make small convolutions ~10x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
