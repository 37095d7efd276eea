"""The speed protocol (syno_automl.measure.paired) on a fake clock: the interval, the stopping rule, the
alternating order, the cap and the control. No test here depends on the machine's speed."""
from __future__ import annotations

import math
import random

import pytest

from syno_automl.errors import OptionError
from syno_automl.measure.paired import Conditions, PairedProtocol, SpeedupEstimate, paired_speedup, t_quantile


class FakeMachine:
    """A clock that advances only when a model runs: each call costs its model's time times a noise factor drawn
    from a seeded generator (and times `drift`, which a test may change between blocks)."""

    def __init__(self, seed: int = 0, noise: float = 0.0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self.noise = noise
        self.calls: list[str] = []

    def model(self, name: str, seconds: float):
        def run() -> None:
            self.calls.append(name)
            factor = math.exp(self.rng.gauss(0.0, self.noise)) if self.noise else 1.0
            self.now += seconds * factor
        return run

    def clock(self) -> float:
        return self.now


def test_a_noiseless_ratio_is_exact_and_stops_at_the_fewest_pairs():
    m = FakeMachine()
    est = paired_speedup(m.model("A", 0.003), m.model("B", 0.002), PairedProtocol(min_pairs=4), clock=m.clock)
    assert est.ratio == pytest.approx(1.5) and est.low == pytest.approx(1.5) and est.high == pytest.approx(1.5)
    assert est.pairs == 4 and est.faster and not est.slower
    assert est.baseline_ms == pytest.approx(3.0) and est.candidate_ms == pytest.approx(2.0)


def test_noise_asks_for_more_pairs_and_the_interval_holds_the_true_ratio():
    estimates = []
    for noise in (0.002, 0.2):
        m = FakeMachine(1, noise)
        estimates.append(paired_speedup(m.model("A", 0.005), m.model("B", 0.004), clock=m.clock))
    quiet, noisy = estimates
    assert quiet.pairs < noisy.pairs <= 40
    assert noisy.holds(1.25) and noisy.high - noisy.low > quiet.high - quiet.low


def test_the_true_ratio_is_inside_the_interval_about_95_percent_of_the_time():
    inside = 0
    for seed in range(200):
        m = FakeMachine(seed, 0.05)
        est = paired_speedup(m.model("A", 0.005), m.model("B", 0.004), PairedProtocol(min_pairs=8, max_pairs=8,
                                                                                  min_block_s=0.004),
                             clock=m.clock)
        inside += est.holds(1.25)
    assert 180 <= inside <= 199   # 95 % of 200 is 190; the binomial's spread is about ±3


def test_the_blocks_alternate_so_that_a_drift_moves_both_sides():
    m = FakeMachine()
    paired_speedup(m.model("A", 0.02), m.model("B", 0.02), PairedProtocol(warmup=0, min_pairs=4, max_pairs=4),
                   clock=m.clock)
    timed = "".join(m.calls[2:])   # after one calibration call of each side
    assert timed == "AB" "BA" "AB" "BA"


def test_a_slow_drift_does_not_bias_the_ratio():
    """The machine slows by 1 % per block: interleaving A B B A cancels it (A then B alone would not)."""
    m = FakeMachine()
    blocks = [0]

    def slowing(seconds: float, name: str):
        def run() -> None:
            m.calls.append(name)
            m.now += seconds * (1.01 ** blocks[0])
            blocks[0] += 1
        return run

    est = paired_speedup(slowing(0.02, "A"), slowing(0.02, "B"), PairedProtocol(warmup=0, min_pairs=8, max_pairs=8),
                         clock=m.clock)
    assert est.holds(1.0) and abs(math.log(est.ratio)) < 0.002


def test_the_cap_ends_a_noisy_measurement_with_a_wide_interval():
    m = FakeMachine(3, 0.3)
    est = paired_speedup(m.model("A", 0.01), m.model("B", 0.01), PairedProtocol(min_pairs=3, max_pairs=5),
                         clock=m.clock)
    assert est.pairs == 5 and not est.faster and not est.slower   # a tie with 1: neither is faster


def test_a_control_against_itself_is_a_tie_with_one():
    m = FakeMachine(4, 0.02)
    base = m.model("A", 0.01)
    est = paired_speedup(base, base, clock=m.clock)
    assert est.holds(1.0) and not est.faster


@pytest.mark.parametrize("a, b, tie", [((1.3, 1.4), (1.35, 1.5), True), ((1.3, 1.4), (1.41, 1.5), False),
                                       ((0.9, 1.1), (1.1, 1.2), True)])
def test_overlapping_intervals_are_a_tie(a, b, tie):
    x = SpeedupEstimate(sum(a) / 2, *a, pairs=6, baseline_ms=1.0, candidate_ms=1.0)
    y = SpeedupEstimate(sum(b) / 2, *b, pairs=6, baseline_ms=1.0, candidate_ms=1.0)
    assert x.overlaps(y) is tie and y.overlaps(x) is tie


def test_an_estimate_round_trips_through_json_with_its_conditions():
    est = SpeedupEstimate(1.41, 1.37, 1.45, 9, 2.0, 1.4, Conditions("cpu (2 cores)", "2.13.0", 1, "fp32",
                                                                     "batch 64", 0.5))
    assert SpeedupEstimate.from_dict(est.to_dict()) == est
    assert est.text() == "1.41× [1.37, 1.45]"
    assert "1 thread," in est.conditions.text() and "load 0.50" in est.conditions.text()


@pytest.mark.parametrize("kwargs", [{"min_pairs": 1}, {"max_pairs": 3, "min_pairs": 4}, {"min_block_s": 0},
                                    {"warmup": -1}, {"target_halfwidth": 0}])
def test_a_nonsense_protocol_is_refused(kwargs):
    with pytest.raises(OptionError):
        PairedProtocol(**kwargs)


def test_t_quantiles():
    assert t_quantile(1) == 12.706 and t_quantile(5) == 2.571 and t_quantile(1000) == 1.96
    with pytest.raises(OptionError):
        t_quantile(0)
