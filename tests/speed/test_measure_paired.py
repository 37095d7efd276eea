"""The speed protocol (syno_automl.speed.paired) on a fake clock: the interval, the stopping rule, the
alternating order, the cap and the control; and fast timing (runtime/timing_rigor.py), which shortens it. No test
here depends on the machine's speed."""
from __future__ import annotations

import math
import random

import pytest

from syno_automl.errors import OptionError
from syno_automl.runtime.process import configure_process
from syno_automl.runtime.timing_rigor import TIMING_ENV, fast_timing, timing_of
from syno_automl.speed.paired import (
    SPEED_PROTOCOL,
    TRIAL_SPEED_PROTOCOL,
    Conditions,
    PairedProtocol,
    SpeedupEstimate,
    paired_speedup,
    paired_speedups,
    t_quantile,
)

# the protocol's own lengths are what these tests check: as written (tests/conftest.py times the suite fast)
pytestmark = pytest.mark.usefixtures("standard_timing")


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
    assert quiet.pairs < noisy.pairs <= 48
    assert noisy.holds(1.25) and noisy.high - noisy.low > quiet.high - quiet.low


def _fixed(pairs: int, batch: int = 2) -> PairedProtocol:
    return PairedProtocol(min_pairs=pairs, max_pairs=pairs, min_block_s=0.004, batch_pairs=batch)


def test_a_re_measurement_falls_inside_the_interval_about_95_percent_of_the_time():
    """The interval is a reproducibility interval: a second run's figure lands inside the first's about 95 % of
    the time (and the true ratio nearly always)."""
    holds_other = holds_true = 0
    for seed in range(200):
        runs = []
        for k in (0, 1):
            m = FakeMachine(1000 * k + seed, 0.05)
            runs.append(paired_speedup(m.model("A", 0.005), m.model("B", 0.004), _fixed(8), clock=m.clock))
        holds_other += runs[0].holds(runs[1].ratio)
        holds_true += runs[0].holds(1.25)
    assert 180 <= holds_other <= 199   # 95 % of 200 is 190; the binomial's spread is about ±3
    assert holds_true >= 195


class MovingMachine(FakeMachine):
    """The machine's state drifts between moments: each stretch of `stretch` blocks slows the candidate by its own
    factor (the ratio itself moves: pairs close in time are correlated)."""

    def __init__(self, seed: int, stretch: int, spread: float) -> None:
        super().__init__(seed, 0.01)
        self.stretch, self.spread, self.blocks, self.factor = stretch, spread, 0, 1.0

    def model(self, name: str, seconds: float):
        plain = super().model(name, seconds)

        def run() -> None:
            if name == "B":
                if self.blocks % self.stretch == 0:
                    self.factor = math.exp(self.rng.gauss(0.0, self.spread))
                self.blocks += 1
                self.now += seconds * (self.factor - 1.0)
            plain()
        return run


def test_batch_means_cover_a_re_measurement_when_close_pairs_are_correlated():
    """With the candidate's speed moving in stretches of 4 blocks, an interval over single pairs is too narrow
    for a second run (~72 % here); batch means of 4 pairs hold it about as often as promised."""
    held = {1: 0, 4: 0}
    for seed in range(150):
        for batch in (1, 4):
            runs = []
            for k in (0, 1):
                m = MovingMachine(1000 * k + seed, stretch=4, spread=0.05)
                runs.append(paired_speedup(m.model("A", 0.005), m.model("B", 0.004), _fixed(16, batch),
                                           clock=m.clock))
            held[batch] += runs[0].holds(runs[1].ratio)
    assert held[4] >= 130 and held[1] < held[4] - 15   # 90 % of 150 is 135; the binomial's spread is about ±4


def test_candidates_take_turns_batch_by_batch_and_one_that_fails_is_none():
    m = FakeMachine()
    calls = {"bad": 0}

    def bad() -> None:
        calls["bad"] += 1
        if calls["bad"] > 3:   # fails after its warm-up and calibration, in its first batch
            raise RuntimeError("out of memory")
        m.now += 0.01

    protocol = PairedProtocol(warmup=0, min_pairs=4, max_pairs=4)
    estimates = paired_speedups(m.model("A", 0.02), [m.model("B", 0.01), bad, m.model("C", 0.04)], protocol,
                                clock=m.clock)
    assert estimates[0] is not None and estimates[0].ratio == pytest.approx(2.0)
    assert estimates[1] is None
    assert estimates[2] is not None and estimates[2].ratio == pytest.approx(0.5)
    # calibration: B 1 + 2 calls, C 1; then a batch (2 pairs) each: B (2 calls a block) then C, the next turn C first
    assert "".join(c for c in m.calls if c in "BC") == "BBB" "C" + "BBBB" "CC" + "CC" "BBBB"


def test_a_failing_baseline_raises():
    m = FakeMachine()

    def broken() -> None:
        raise RuntimeError("baseline broke")

    with pytest.raises(RuntimeError, match="baseline broke"):
        paired_speedups(broken, [m.model("B", 0.01)], PairedProtocol(warmup=0), clock=m.clock)


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
    est = paired_speedup(m.model("A", 0.01), m.model("B", 0.01), PairedProtocol(min_pairs=4, max_pairs=6),
                         clock=m.clock)
    assert est.pairs == 6 and not est.faster and not est.slower   # a tie with 1: neither is faster


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
                                    {"warmup": -1}, {"target_halfwidth": 0}, {"batch_pairs": 0},
                                    {"min_pairs": 3, "batch_pairs": 2}])
def test_a_nonsense_protocol_is_refused(kwargs):
    with pytest.raises(OptionError):
        PairedProtocol(**kwargs)


def test_t_quantiles():
    assert t_quantile(1) == 12.706 and t_quantile(5) == 2.571 and t_quantile(1000) == 1.96
    with pytest.raises(OptionError):
        t_quantile(0)


def test_the_batches_go_through_the_copies_of_each_model_in_turn():
    m = FakeMachine()
    protocol = PairedProtocol(warmup=0, min_pairs=4, max_pairs=4, copies=2)
    paired_speedup([m.model("A0", 0.02), m.model("A1", 0.02)], [m.model("B0", 0.02), m.model("B1", 0.02)],
                   protocol, clock=m.clock)
    assert m.calls == ["A0", "B0"] + ["A0", "B0", "B0", "A0"] + ["A1", "B1", "B1", "A1"]


def test_copies_that_run_at_other_speeds_are_averaged_and_widen_the_interval():
    """Where the memory layout moves a model's speed (here: the candidate's two copies 10 % apart), the ratio is
    their average and the interval says how far apart they are; one copy alone would give a narrow interval
    around its own speed."""
    m = FakeMachine(5, 0.01)
    fast, slow = m.model("B0", 0.004), m.model("B1", 0.0044)
    both = paired_speedup(m.model("A", 0.005), [fast, slow], PairedProtocol(copies=2), clock=m.clock)
    assert both.ratio == pytest.approx(1.25 / math.sqrt(1.1), rel=0.01)
    one = paired_speedup(m.model("A", 0.005), fast, clock=m.clock)
    assert one.ratio == pytest.approx(1.25, rel=0.01)
    assert both.high - both.low > 2 * (one.high - one.low)


@pytest.mark.parametrize("protocol", [SPEED_PROTOCOL, TRIAL_SPEED_PROTOCOL, PairedProtocol(min_pairs=8, copies=1)])
def test_fast_timing_shortens_every_protocol_and_the_figure_says_so(protocol, monkeypatch):
    """--timing fast: one warm-up, 5 ms blocks, 4 to 6 pairs, 2 copies at most; standard: the protocol as written."""
    def timed() -> SpeedupEstimate:
        m = FakeMachine(seed=3, noise=0.3)
        return paired_speedup(m.model("A", 0.003), m.model("B", 0.002), protocol, clock=m.clock)

    standard = timed()
    monkeypatch.setenv(TIMING_ENV, "fast")
    fast = protocol.as_asked()
    assert fast_timing() and fast == protocol.fast() and fast != protocol
    assert (fast.warmup, fast.min_block_s, fast.min_pairs, fast.max_pairs) == (1, 0.005, 4, 6)
    assert fast.copies == min(protocol.copies, 2) and fast.target_halfwidth == protocol.target_halfwidth
    quick = timed()
    assert 4 <= quick.pairs <= 6 < standard.pairs and quick.low <= 1.5 <= quick.high
    assert Conditions.here("cpu", 1, "fp32", "batch 1", "eager").setup == "eager, fast timing"
    monkeypatch.setenv(TIMING_ENV, "standard")
    assert protocol.as_asked() == protocol and Conditions.here("cpu", 1, "fp32", "batch 1").setup == ""


def test_the_timing_setting_is_refused_when_unknown_and_set_by_an_entry_point(monkeypatch):
    monkeypatch.setenv(TIMING_ENV, "quick")
    with pytest.raises(OptionError, match=r"\$SYNO_AUTOML_TIMING must be 'standard' or 'fast', got 'quick'"):
        timing_of(None)
    configure_process(allocator=False, timing="fast")   # what --timing fast does at the CLI's start
    assert timing_of(None) == "fast"
