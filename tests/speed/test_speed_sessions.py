"""The final stage's sessions pooled (syno_automl.speed.pooled, syno_automl.speed.sessions): the figure is
the sessions' geometric mean, the interval holds the spread between sessions estimated over all candidates, never
narrower than a candidate's own, and the stage runs its sessions and labels them. No test reads a clock."""
from __future__ import annotations

import math
import random

import pytest
from _syno_helpers import brief_speed_protocol, speed_context_fixture

from syno_automl.errors import OptionError
from syno_automl.runtime import parse_target
from syno_automl.speed.paired import SpeedupEstimate
from syno_automl.speed.pooled import pool_sessions, with_run_drift
from syno_automl.speed.probe import SpeedMeasurement
from syno_automl.speed.sessions import CUDA_RUN_DRIFT, RUN_DRIFT, measure_final, pool_measurements, run_drift

CPU = parse_target("cpu.eager")


def _estimate(ratio: float, half: float = 0.01, pairs: int = 16) -> SpeedupEstimate:
    return SpeedupEstimate(ratio, ratio * math.exp(-half), ratio * math.exp(half), pairs, 10.0, 10.0 / ratio)


def test_the_figure_is_the_geometric_mean_and_the_pairs_add_up():
    pooled = pool_sessions([[_estimate(1.44)], [_estimate(1.69)]])[0]
    assert pooled is not None
    assert pooled.ratio == pytest.approx(math.sqrt(1.44 * 1.69)) and pooled.pairs == 32


def test_the_interval_holds_the_spread_between_sessions():
    """Six candidates whose two sessions differ by ±3 % while each session's own interval is ±1 %: the pooled
    interval is as wide as that spread says, not as one session's."""
    first = [_estimate(r) for r in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0)]
    second = [_estimate(r * math.exp(0.03 * (-1) ** i)) for i, r in enumerate((1.0, 1.2, 1.4, 1.6, 1.8, 2.0))]
    for pooled in pool_sessions([first, second]):
        assert pooled is not None
        half = math.log(pooled.high / pooled.ratio)
        # two sessions 0.03 apart: a session's sd about their mean 0.03 / sqrt(2); the reproducibility of a mean
        # of two: t(6) * sd * sqrt(2 / 2)
        assert half == pytest.approx(2.447 * 0.03 / math.sqrt(2), rel=1e-3)


def test_a_noisier_candidate_keeps_its_own_wider_interval():
    quiet = [[_estimate(1.5, 0.005), _estimate(1.3, 0.2)], [_estimate(1.5, 0.005), _estimate(1.3, 0.2)]]
    steady, noisy = pool_sessions(quiet)
    assert steady is not None and noisy is not None
    assert math.log(steady.high / steady.ratio) == pytest.approx(math.sqrt(0.005 ** 2 / 2))
    assert math.log(noisy.high / noisy.ratio) == pytest.approx(math.sqrt(0.2 ** 2 / 2))


def test_missing_sessions():
    one = _estimate(1.2)
    pooled = pool_sessions([[one, None, None], [_estimate(1.3), _estimate(1.1), None]])
    assert pooled[0] is not None and pooled[0].pairs == 32
    assert pooled[1] is not None and pooled[1].ratio == 1.1   # measured once: that session's figure
    assert pooled[2] is None
    with pytest.raises(OptionError):
        pool_sessions([[one], [one, one]])
    with pytest.raises(OptionError):
        pool_sessions([])


def test_coverage_of_simulated_processes():
    """Simulated: each process shifts a candidate's log ratio by N(0, 2 %) and each session's own interval sees
    only N(0, 0.7 %). One session's interval holds another measurement's figure in far fewer than 90 % of cases;
    the pooled interval (2 sessions, 6 candidates) in about 95 %."""
    rng = random.Random(0)
    truths = [math.log(1.0 + 0.1 * i) for i in range(6)]

    def session() -> list[SpeedupEstimate | None]:
        return [_estimate(math.exp(t + rng.gauss(0, 0.02) + rng.gauss(0, 0.007)), half=1.96 * 0.007 * math.sqrt(2))
                for t in truths]

    single = pooled = total = 0
    for _ in range(300):
        a, b, c, d = session(), session(), session(), session()
        single += sum(x is not None and y is not None and x.holds(y.ratio) for x, y in zip(a, b))
        first, second = pool_sessions([a, b]), pool_sessions([c, d])
        pooled += sum(x is not None and y is not None and x.holds(y.ratio) for x, y in zip(first, second))
        total += len(truths)
    assert single / total < 0.6
    assert 0.9 <= pooled / total <= 0.99


def test_the_run_drift_adds_in_quadrature_and_keeps_the_figure():
    widened = with_run_drift(_estimate(1.4, half=0.03), 0.01)
    assert widened.ratio == 1.4
    assert math.log(widened.high / 1.4) == pytest.approx(math.hypot(0.03, 1.96 * math.sqrt(2) * 0.01))
    assert math.log(1.4 / widened.low) == pytest.approx(math.log(widened.high / 1.4))
    assert with_run_drift(_estimate(1.4, half=0.03), 0.0) == _estimate(1.4, half=0.03)
    with pytest.raises(OptionError):
        with_run_drift(_estimate(1.4), -0.01)
    with pytest.raises(OptionError):
        with_run_drift(_estimate(1.4), math.nan)


def test_the_operators_carry_the_run_drift_and_the_control_does_not():
    """Two sessions that agree exactly: the spread between them is nil, so an operator's interval is its own
    sessions' combined with the run drift, and the control's its own alone (both its sides are one model)."""
    runs = [SpeedMeasurement("cpu.eager: eager", [_estimate(1.5, 0.01)], _estimate(1.0, 0.01), 10.0)
            for _ in range(2)]
    pooled = pool_measurements(runs, CPU)
    own = math.sqrt(0.01 ** 2 / 2)
    operator, control = pooled.estimates[0], pooled.control
    assert operator is not None and control is not None
    assert math.log(operator.high / operator.ratio) == pytest.approx(math.hypot(own, 1.96 * math.sqrt(2) * RUN_DRIFT))
    assert math.log(control.high / control.ratio) == pytest.approx(own)
    single = pool_measurements(runs[:1], CPU)
    assert single.label == "cpu.eager: eager" and single.estimates[0] is not None
    assert math.log(single.estimates[0].high / 1.5) == pytest.approx(math.hypot(0.01, 1.96 * math.sqrt(2) * RUN_DRIFT))
    on_gpu = pool_measurements(runs, parse_target("cuda.compiled"))
    assert on_gpu.estimates[0] is not None and on_gpu.control is not None
    gpu_term = 1.96 * math.sqrt(2) * CUDA_RUN_DRIFT
    assert math.log(on_gpu.estimates[0].high / 1.5) == pytest.approx(math.hypot(own, gpu_term))
    assert math.log(on_gpu.control.high / on_gpu.control.ratio) == pytest.approx(own)


def test_the_run_drift_follows_the_targets_device():
    """Measured apart: a GPU run's common shift (H200) was twice the CPU's; both targets of a device share it."""
    assert run_drift(parse_target("cpu.eager")) == run_drift(parse_target("cpu.compiled")) == RUN_DRIFT
    assert run_drift(parse_target("cuda.eager")) == run_drift(parse_target("cuda.compiled")) == CUDA_RUN_DRIFT
    assert CUDA_RUN_DRIFT > RUN_DRIFT > 0


def test_the_run_drift_covers_a_shift_common_to_a_run():
    """Simulated: every operator of a run shifted alike by N(0, RUN_DRIFT), each session's own noise N(0, 0.7 %)
    and a process's N(0, 1 %) on top: without the drift term a run's interval holds another run's figure in under
    90 % of cases, with it in 90 % or more."""
    rng = random.Random(1)
    truths = [math.log(1.0 + 0.1 * i) for i in range(6)]

    def run() -> tuple[list[SpeedupEstimate | None], list[SpeedupEstimate | None]]:
        shift = rng.gauss(0, RUN_DRIFT)
        sessions = [[_estimate(math.exp(t + shift + rng.gauss(0, 0.01) + rng.gauss(0, 0.007)),
                               half=1.96 * 0.007 * math.sqrt(2)) for t in truths] for _ in range(2)]
        bare = pool_sessions(sessions)
        return bare, [None if e is None else with_run_drift(e, RUN_DRIFT) for e in bare]

    bare = drifted = total = 0
    for _ in range(300):
        (a, a_drift), (b, b_drift) = run(), run()
        bare += sum(x is not None and y is not None and x.holds(y.ratio) for x, y in zip(a, b))
        drifted += sum(x is not None and y is not None and x.holds(y.ratio) for x, y in zip(a_drift, b_drift))
        total += len(truths)
    assert bare / total < 0.9
    assert 0.9 <= drifted / total <= 0.995


BRIEF = brief_speed_protocol()


context = speed_context_fixture("same")


def test_the_final_stage_runs_two_sessions_and_says_so(context, standard_timing):
    ops = context.space.sample(2, seed=3)
    speed = measure_final(context.speed_subject(), ops, protocol=BRIEF, process="same")
    assert speed.label.endswith("(2 sessions in the search's process, pooled)"), speed.label
    assert speed.control is not None and speed.control.pairs == 8
    assert len(speed.estimates) == 2 and all(e is not None and e.pairs == 8 for e in speed.estimates)
    assert speed.baseline_ms is not None and speed.baseline_ms > 0
    one = measure_final(context.speed_subject(), ops, protocol=BRIEF, sessions=1, process="same")
    assert one.control is not None and one.control.pairs == 4 and "pooled" not in one.label
    with pytest.raises(OptionError):
        measure_final(context.speed_subject(), ops, sessions=0)
    with pytest.raises(OptionError):
        measure_final(context.speed_subject(), ops, process="elsewhere")


def test_fast_timing_runs_one_session(context, monkeypatch):
    """As pyperf's --fast runs fewer processes: one session, whatever is asked, its figures said to be fast."""
    monkeypatch.setenv("SYNO_AUTOML_TIMING", "fast")
    ops = context.space.sample(1, seed=3)
    speed = measure_final(context.speed_subject(), ops, protocol=BRIEF, sessions=3, process="same")
    assert "pooled" not in speed.label and "fast timing" in speed.label, speed.label
    assert speed.control is not None and speed.control.pairs == 4, speed.control
    assert len(speed.estimates) == 1 and speed.estimates[0] is not None and speed.estimates[0].pairs == 4


def test_labels_of_fresh_and_fallen_back_sessions():
    fresh = [SpeedMeasurement("cpu.eager: eager (a fresh process)", [None], None, 1.0) for _ in range(2)]
    assert pool_measurements(fresh, CPU).label == "cpu.eager: eager (2 fresh processes, pooled)"
    mixed = [fresh[0], SpeedMeasurement("cpu.eager: eager (in the search's process: a fresh one failed: X)",
                                        [None], None, 1.0)]
    assert pool_measurements(mixed, CPU).label.startswith("pooled over 2 sessions: ")
    assert "failed: X" in pool_measurements(mixed, CPU).label


def test_fp32_on_cuda_times_matmuls_at_the_precision_of_cudnns_convolutions(context, monkeypatch):
    """PyTorch gives cuDNN's convolutions TF32 and matmuls full fp32 by default: on a CUDA target at fp32 the probe
    times both in TF32 (and its conditions say tf32), or both in fp32 where cuDNN's TF32 is off; the CPU's fp32 is
    untouched. No CUDA here: the probe is only built, and the matmul switch checked (set while timing, then as
    before)."""
    import torch

    from syno_automl.speed.probe import SpeedProbe, _numerics

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    assert SpeedProbe(context.speed_subject(parse_target("cuda.eager"))).precision == "tf32"
    assert SpeedProbe(context.speed_subject(parse_target("cpu.eager"))).precision == "fp32"
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert SpeedProbe(context.speed_subject(parse_target("cuda.compiled"))).precision == "fp32"
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32   # (cuBLAS's flags are not attributes monkeypatch can restore)
    try:
        matmul.allow_tf32 = False
        with _numerics("cuda", "tf32"):
            assert matmul.allow_tf32
        assert not matmul.allow_tf32
    finally:
        matmul.allow_tf32 = before
