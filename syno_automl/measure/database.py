"""The on-disk tuning database: MetaSchedule's JSON database under a work dir, and the budgets already spent.

One ``JSONDatabase`` (``database_workload.json``, ``database_tuning_record.json``) per work dir, shared by all
workloads: a workload that already holds ``>= trials`` records for the same target is not re-tuned. Models keep
theirs under ``<work_dir>/relax-<device>`` (``compile_relax`` applies the top record of a workload whatever its
target), with ``syno_task_budgets.json`` beside it: the budget each task was already given, so that a task whose
design space holds fewer schedules than the budget is not re-tuned on every run either.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

__all__ = ["DEFAULT_WORK_DIR", "open_database", "records_for", "budget_key", "load_budgets", "save_budgets"]

DEFAULT_WORK_DIR = os.environ.get("SYNO_TVM_WORK_DIR", os.path.join(os.getcwd(), ".tvm_tuning"))
BUDGETS = "syno_task_budgets.json"


def open_database(work_dir: str) -> Any:
    """The JSON database of ``work_dir`` (created when missing), read from disk now."""
    from tvm.s_tir import meta_schedule as ms

    os.makedirs(work_dir, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")


def records_for(db: Any, mod: Any, target: Any) -> list:
    """Valid tuning records of this workload on this target (best first)."""
    if not db.has_workload(mod):
        return []
    wl = db.commit_workload(mod)
    recs = db.get_top_k(wl, 1 << 30)
    want = str(target)
    return [r for r in recs if r.target is None or str(r.target) == want]


def budget_key(mod: Any, tgt: Any) -> str:
    try:
        from tvm_ffi import structural_hash  # TVM 0.27
    except ImportError:  # older TVM
        from tvm.ir import structural_hash

    return f"{structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}|{tgt}"


def load_budgets(work_dir: str) -> dict[str, int]:
    try:
        with open(os.path.join(work_dir, BUDGETS)) as f:
            return {str(k): int(v) for k, v in json.load(f).items()}
    except (OSError, ValueError):
        return {}


def save_budgets(work_dir: str, spent: dict[str, int]) -> None:
    """Merge ``spent`` into the file (max per task), written atomically."""
    merged = load_budgets(work_dir)
    for k, v in spent.items():
        merged[k] = max(v, merged.get(k, 0))
    fd, tmp = tempfile.mkstemp(dir=work_dir, prefix=".budgets_")
    with os.fdopen(fd, "w") as f:
        json.dump(merged, f, indent=0, sort_keys=True)
    os.replace(tmp, os.path.join(work_dir, BUDGETS))
