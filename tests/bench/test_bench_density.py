"""bench/density.py's figures on a hand-made cache (no training): Spearman with ties, the densities per FLOPs bin
against the same schedule's baseline, the cache keyed so that each evaluation trains once."""
from __future__ import annotations

import argparse
import io
from pathlib import Path

import density  # bench/density.py (bench/ is on pytest's pythonpath)
import pytest


@pytest.mark.parametrize("a, b, rho", [
    ([1, 2, 3, 4], [10, 20, 30, 40], 1.0),
    ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),
    ([1, 2, 2, 3], [1, 2, 2, 3], 1.0),          # ties take average ranks
    ([1, 2, 3, 4], [1, 3, 2, 4], 0.8),
])
def test_spearman(a: list, b: list, rho: float) -> None:
    assert density.spearman(a, b) == pytest.approx(rho)


def _args(**kw) -> argparse.Namespace:
    base = dict(trial_epochs=3, final_epochs=6, lr=0.05, batch=64, baseline_seeds=1, trial_seeds=1, noise_ops=0)
    base.update(kw)
    return argparse.Namespace(**base)


def test_report_counts_within_1_and_3_pp_of_the_same_schedules_baseline(tmp_path: Path) -> None:
    cache = density.Cache(tmp_path / "c.jsonl")
    values = {density.BASELINE: (0.90, 0.95), "a": (0.895, 0.945), "b": (0.88, 0.93), "c": (0.50, 0.96),
              "d": (0.70, 0.60)}
    for h, (trial, final) in values.items():
        for epochs, v in ((3, trial), (6, final)):
            cache.add({"key": density.job_key(h, "onecycle", epochs, 0, 0.05, 64), "val_acc": v,
                       "val_loss": 1.0 - v})
    ops = [("a", "", 0.005), ("b", "", 0.05), ("c", "", 0.3), ("d", "", 0.3)]
    figures = density.report(density.Cache(tmp_path / "c.jsonl"), ops, _args(), "onecycle", "test", io.StringIO())
    n, cells = figures["bins"]["all"]
    assert n == 4 and cells == [0.25, 0.5, 0.5, 0.75]   # 1 pp @3, 3 pp @3, 1 pp @6, 3 pp @6
    assert figures["bins"]["[0.25, inf)"] == (2, [0.0, 0.0, 0.5, 0.5])
    assert figures["spearman_acc"] == pytest.approx(density.spearman([0.895, 0.88, 0.5, 0.7],
                                                                     [0.945, 0.93, 0.96, 0.6]))


def test_each_evaluation_is_one_job_and_cached_ones_are_not_trained_again(tmp_path: Path) -> None:
    args = _args(baseline_seeds=2, trial_seeds=3, noise_ops=1)
    jobs = list(density.jobs_for([("a", "{}", 0.1), ("b", "{}", 0.2)], "cosine", args))
    keys = [j["key"] for j in jobs]
    assert len(keys) == len(set(keys)) == 2 * 2 + (3 + 1) + 2   # baselines, trials (a: 3 seeds), finals
    cache = density.Cache(tmp_path / "c.jsonl")
    for j in jobs:
        cache.add({"key": j["key"], "val_acc": 0.5})
    out = io.StringIO()
    density.run_jobs(jobs, density.Cache(tmp_path / "c.jsonl"), workers=1, out=out)
    assert "0 to train" in out.getvalue()
