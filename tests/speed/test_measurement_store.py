"""The measurement store and a trial's speed, with fake clocks (issue 32, items 2 and 3): the store key separates
operators, sizes, targets, precisions, devices and torch versions; a trial reuses a stored measurement instead of
timing again; the objective's second value is the measured time ratio (planned: the cost ratio); `reevaluate`'s
re-measurement replaces the stored one; a study's speed objective as recorded (planned before it existed)."""
from __future__ import annotations

import io
import random
from dataclasses import replace

import optuna
import pytest

from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig, with_legacy_settings
from syno_automl.errors import TrialResultError
from syno_automl.settings import SettingError
from syno_automl.speed.paired import SPEED_PROTOCOL, TRIAL_SPEED_PROTOCOL, PairedProtocol, paired_speedup
from syno_automl.speed.store import Measurement, MeasurementKey, MeasurementStore
from syno_automl.study import prepare
from syno_automl.study import trial_speed as trial_speed_module
from syno_automl.study.trial_speed import (
    MEASURED,
    PLANNED,
    SpeedObjective,
    TrialSpeed,
    announce_speed_objective,
    record_speed_objective,
    speed_objective_of,
)

KEY = MeasurementKey("ab12", '{"shape": [64, 1, 8, 8]}', "cpu.eager", "fp32", "cpu (1 thread), X", "2.5.1")


class FakeTimer:
    """A measuring function on a fake clock: the original takes 2 ms a call, any operator 1 ms (the control: both
    2 ms); counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, op, protocol: PairedProtocol = TRIAL_SPEED_PROTOCOL):
        self.calls += 1
        now = [0.0]

        def call(seconds: float):
            def run() -> None:
                now[0] += seconds
            return run
        return paired_speedup(call(0.002), call(0.002 if op is None else 0.001), protocol, clock=lambda: now[0])


@pytest.fixture(scope="module")
def context():
    return prepare(SearchConfig())


def _study(kind: str = MEASURED) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"])
    record_speed_objective(study, SpeedObjective(kind, "cpu.eager"))
    return study


def test_the_key_separates_what_a_measurement_depends_on():
    study = optuna.create_study()
    store = MeasurementStore(study)
    estimate = FakeTimer()(op="x")
    store.put(Measurement(KEY, estimate, trial=4))
    assert store.get(KEY) == Measurement(KEY, estimate, 4)
    others = [replace(KEY, **{field: value}) for field, value in (
        ("operator", "cd34"), ("sizes", '{"shape": [32, 1, 8, 8]}'), ("target", "cpu.compiled"),
        ("precision", "bf16"), ("device", "cpu (2 threads), X"), ("torch", "2.6.0"))]
    assert all(store.get(k) is None for k in others)
    assert len({k.digest() for k in [KEY, *others]}) == 7
    store.put(Measurement(others[2], estimate, trial=5))    # another target: a measurement of its own
    assert sorted(m.trial for m in store.all()) == [4, 5]


def test_a_trial_reuses_a_stored_measurement_and_its_value_is_the_time_ratio(context):
    timer, study = FakeTimer(), _study()
    speed = TrialSpeed(context, SpeedObjective(MEASURED, "cpu.eager"), measure=timer)
    op = context.space.sample(1, seed=0)[0]
    first, second, base = study.ask(), study.ask(), study.ask()
    assert speed.measure(first, None, op).text() == "2.00× [2.00, 2.00]"
    assert speed.measure(second, None, op).text() == "2.00× [2.00, 2.00]" and timer.calls == 1   # reused
    assert second.user_attrs[V.SPEED]["measured_in_trial"] == first.number
    assert second.user_attrs[V.speedup_attr("cpu.eager", "low")] == pytest.approx(2.0)
    assert speed.objective_value(second, baseline=False) == pytest.approx(0.5)
    speed.measure(base, None, None)   # the baseline's: the control, 1.00×; its objective value is 1.0
    assert timer.calls == 2 and base.user_attrs[V.speedup_attr("cpu.eager")] == pytest.approx(1.0)
    assert speed.objective_value(base, baseline=True) == 1.0
    assert speed.text(second) == "  speedup 2.00× [2.00, 2.00] on cpu.eager"


def test_another_target_or_precision_is_measured_again(context):
    timer, study = FakeTimer(), _study()
    op = context.space.sample(1, seed=0)[0]
    bf16 = context.with_config(replace(context.config, precision="bf16-mixed"))
    for ctx, target in ((context, "cpu.eager"), (context, "cpu.compiled"), (bf16, "cpu.eager"), (context, "cpu.eager")):
        TrialSpeed(ctx, SpeedObjective(MEASURED, target), measure=timer).measure(study.ask(), None, op)
    assert timer.calls == 3
    keys = [m.key for m in MeasurementStore(study).all()]
    assert sorted((k.target, k.precision) for k in keys) == [("cpu.compiled", "fp32"), ("cpu.eager", "bf16"),
                                                             ("cpu.eager", "fp32")]


def test_an_unmeasured_trial_is_not_comparable_and_planned_reads_the_cost(context):
    study = _study()
    op = context.space.sample(1, seed=0)[0]
    failing = TrialSpeed(context, SpeedObjective(MEASURED, "cpu.eager"), measure=lambda op: None)
    trial = study.ask()
    assert failing.measure(trial, None, op) is None and V.SPEED_FAILURE in trial.user_attrs
    with pytest.raises(TrialResultError, match="no measured speedup on cpu.eager"):
        failing.objective_value(trial, baseline=False)
    timer = FakeTimer()
    planned = TrialSpeed(context, SpeedObjective(PLANNED, "cpu.eager"), measure=timer)
    trial = study.ask()
    trial.set_user_attr(V.COST_RATIO, 0.6)
    assert planned.measure(trial, None, op) is None and timer.calls == 0 and planned.text(trial) == ""
    assert planned.objective_value(trial, baseline=False) == 0.6


def test_reevaluate_measures_afresh_and_replaces_the_stored_figure(context):
    study = _study()
    op = context.space.sample(1, seed=0)[0]
    timer = FakeTimer()
    speed = TrialSpeed(context, SpeedObjective(MEASURED, "cpu.eager"), measure=timer)
    speed.measure(study.ask(), None, op)
    slower = TrialSpeed(context, SpeedObjective(MEASURED, "cpu.eager"),
                        measure=lambda o: timer(None))   # the same key, now timed at 1.00×
    assert slower.remeasure(study, None, op).ratio == pytest.approx(1.0) and timer.calls == 2
    assert [m.estimate.ratio for m in MeasurementStore(study).all()] == [pytest.approx(1.0)]


def test_the_trial_protocol_is_the_final_one_kept_short(standard_timing):
    assert TRIAL_SPEED_PROTOCOL.max_pairs < SPEED_PROTOCOL.max_pairs
    assert TRIAL_SPEED_PROTOCOL.target_halfwidth > SPEED_PROTOCOL.target_halfwidth
    now, factor, rng = [0.0], [1.0], random.Random(0)

    def drift() -> None:   # the machine's load, redrawn at every block's edge (+-20 %): never within +-3 %
        factor[0] = rng.uniform(0.8, 1.2)

    def noisy() -> None:
        now[0] += 0.001 * factor[0]

    def steady() -> None:
        now[0] += 0.001

    assert paired_speedup(steady, noisy, TRIAL_SPEED_PROTOCOL, clock=lambda: now[0], sync=drift).pairs == 20
    assert paired_speedup(steady, steady, TRIAL_SPEED_PROTOCOL, clock=lambda: now[0]).pairs == 8


def test_a_study_speed_objective_as_recorded_and_planned_before_it_existed(monkeypatch):
    old = optuna.create_study(directions=["maximize", "minimize"])
    old.set_user_attr(V.SETTINGS, {"task": "image", "speed_target": "cpu.compiled"})
    assert speed_objective_of(old) == SpeedObjective(PLANNED, "cpu.compiled")
    assert with_legacy_settings({"task": "image"})["speed_objective"] == PLANNED
    fell_back = _study(PLANNED)
    record_speed_objective(fell_back, SpeedObjective(PLANNED, "cuda.eager", "no CUDA here"))
    out = io.StringIO()
    assert announce_speed_objective(fell_back, out).reason == "no CUDA here"
    assert "not measured: no CUDA here" in out.getvalue()

    monkeypatch.setattr(trial_speed_module, "why_not_runnable",   # as on a machine without CUDA (also on a GPU one)
                        lambda target: "torch sees no CUDA device here" if target.cuda else None)
    measured = _study()
    record_speed_objective(measured, SpeedObjective(MEASURED, "cuda.compiled"))
    with pytest.raises(SettingError, match="measures its speed objective on cuda.compiled"):
        announce_speed_objective(measured, None)
