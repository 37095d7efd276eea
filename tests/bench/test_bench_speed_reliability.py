"""bench/speed_reliability.py's offline figures (--from-saved): the operators' intervals re-pooled with another run
drift, on hand-made runs (no timing)."""
from __future__ import annotations

import math

import pytest
import speed_reliability  # bench/speed_reliability.py (bench/ is on pytest's pythonpath)


def _estimate(ratio: float, half: float) -> dict:
    return {"ratio": ratio, "low": ratio * math.exp(-half), "high": ratio * math.exp(half), "pairs": 48}


def _runs(shift: float, drift: float) -> list[dict]:
    """Two runs of three operators, the second shifted alike by `shift` (log), intervals holding `drift`."""
    own = 0.01
    half = math.hypot(own, 1.96 * math.sqrt(2) * drift)
    return [{"estimates": [_estimate(r * math.exp(k * shift), half) for r in (0.6, 0.7, 0.9)], "drift": drift,
             "control": None} for k in (0, 1)]


def test_a_saved_runs_intervals_take_another_drift_and_keep_their_figures():
    runs = _runs(shift=0.05, drift=0.012)
    assert speed_reliability.compare("x", runs)["coverage"] == 0.0      # a +5 % shift: 1.2 % cannot hold it
    wider = speed_reliability.with_drift(runs, 0.024, saved_drift=0.0)
    assert speed_reliability.compare("x", wider)["coverage"] == 1.0
    assert [e["ratio"] for e in wider[1]["estimates"]] == [e["ratio"] for e in runs[1]["estimates"]]
    back = speed_reliability.with_drift(wider, 0.012, saved_drift=0.0)   # each run's own "drift" is used
    for a, b in zip(back[0]["estimates"], runs[0]["estimates"]):
        assert a["low"] == pytest.approx(b["low"]) and a["high"] == pytest.approx(b["high"])
    # a file saved before runs recorded their drift: --saved-drift says which one its intervals carry
    bare = [{k: v for k, v in run.items() if k != "drift"} for run in runs]
    assert speed_reliability.with_drift(bare, 0.024, saved_drift=0.012)[0]["estimates"][0]["high"] == \
        pytest.approx(wider[0]["estimates"][0]["high"])
