"""Measured speed in every trial (issue 32, item 2) and its store (item 3), in real small searches on the CPU:
every finished trial, pruned ones too, carries its speedup with its interval (trial attrs and MLflow), the pareto
values and so the MCTS reward use the measured time ratio, a target this machine cannot run falls back to the
planned cost ratio with one printed line, and a --resume reuses the study's measurements instead of timing again
(counted, never timed: no figure here depends on the machine's speed)."""
from __future__ import annotations

import io
import shutil
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli_here, read_runs, read_study

from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig
from syno_automl.search.objectives import objective_names
from syno_automl.speed.paired import TRIAL_SPEED_PROTOCOL
from syno_automl.speed.probe import SpeedProbe
from syno_automl.speed.store import MeasurementStore
from syno_automl.study import run_search
from syno_automl.study import trial_speed as trial_speed_module

SEARCH = ("search", "--trials", "2", "--epochs", "1", "--seed", "1", "--timeout", "0", "--finalists", "0")
TARGET = "cpu.eager"
FINISHED = ("COMPLETE", "PRUNED", "FAIL")


class Counted:
    """SpeedProbe's measure and control counted (the real ones run): how many measurements were taken."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.measure = self.control = 0
        measure, control = SpeedProbe.measure, SpeedProbe.control

        def counted_measure(probe, op):
            self.measure += 1
            return measure(probe, op)

        def counted_control(probe):
            self.control += 1
            return control(probe)

        patch.setattr(SpeedProbe, "measure", counted_measure)
        patch.setattr(SpeedProbe, "control", counted_control)


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str, Counted]:
    folder = tmp_path_factory.mktemp("measured")
    with pytest.MonkeyPatch.context() as patch:
        counted = Counted(patch)
        out = cli_here(folder, *SEARCH).stdout   # the default speed objective: measured
    return folder, out, counted


def _speed(t: optuna.trial.FrozenTrial) -> tuple[float, float, float]:
    return tuple(t.user_attrs[V.speedup_attr(TARGET, b)] for b in ("", "low", "high"))  # type: ignore[return-value]


def test_every_trial_carries_its_measured_speedup_and_the_pareto_values_use_it(searched):
    folder, out, counted = searched
    study = read_study(folder)
    assert study.user_attrs[V.SPEED_OBJECTIVE] == {"objective": "measured", "target": TARGET, "reason": None}
    assert objective_names(study) == ["val_acc", "time_ratio"]
    assert "Pareto front (val_acc vs measured time ratio, study.best_trials)" in out
    trials = [t for t in study.trials if t.state.name in FINISHED]
    assert len(trials) == 3 and trials[0].user_attrs[V.BASELINE]
    assert (counted.control, counted.measure) == (1, 2)   # the baseline's control, one per operator
    for t in trials:
        ratio, low, high = _speed(t)
        assert 0 < low <= ratio <= high
        record = t.user_attrs[V.SPEED]
        assert record["ratio"] == ratio and record["measured_in_trial"] == t.number \
            and record["pairs"] >= TRIAL_SPEED_PROTOCOL.as_asked().min_pairs
        assert record["conditions"]["precision"] == "fp32" and record["conditions"]["batch"] == "batch 64"
        assert record["conditions"]["device"] == "cpu (1 thread)"
        if t.state.name == "COMPLETE":
            expected = 1.0 if t.user_attrs.get(V.BASELINE) else 1.0 / ratio
            assert t.values[1] == pytest.approx(expected, rel=1e-12)
            assert f"speedup {ratio:.2f}× [{low:.2f}, {high:.2f}]" in out
    store = MeasurementStore(study).all()
    assert sorted(m.trial for m in store) == [t.number for t in trials]
    assert {m.key.digest() for m in store} == {t.user_attrs[V.SPEED]["key"] for t in trials}


def test_the_trial_runs_hold_the_speedup_its_interval_and_conditions(searched):
    folder, _, _ = searched
    study = read_study(folder)
    runs = {r.info.run_id: r for r in read_runs(folder)}
    for t in study.trials:
        run = runs[t.user_attrs[V.RUN_ID]]
        ratio, low, high = _speed(t)
        assert run.data.metrics[V.speedup_metric(TARGET)] == pytest.approx(ratio)
        assert run.data.metrics[V.speedup_metric(TARGET, "low")] == pytest.approx(low)
        assert run.data.metrics[V.speedup_metric(TARGET, "high")] == pytest.approx(high)
        assert run.data.tags[V.TAG_SPEED + "key"] == t.user_attrs[V.SPEED]["key"]
        assert run.data.tags[V.TAG_SPEED + "device"] == "cpu (1 thread)"
        assert run.data.tags[V.TAG_SPEED + "target"] == TARGET
        assert not any(p.startswith(V.TAG_SPEED) for p in run.data.params)   # strings: never a Compare axis


def test_a_resume_reuses_the_study_measurements(searched, monkeypatch):
    folder, _, _ = searched
    copy = folder.parent / (folder.name + "-resumed")
    copy.mkdir()
    shutil.copy(folder / "syno.db", copy / "syno.db")
    study = read_study(copy)
    again = study.trials[1]   # a retried trial runs its operator again: as a worker's retry would
    study.enqueue_trial({}, user_attrs={V.OPERATOR: again.user_attrs[V.OPERATOR]})
    counted = Counted(monkeypatch)
    cli_here(copy, "search", "--resume", "--trials", "3", "--tracking-uri", "none", "--finalists", "0", "-q")
    study = read_study(copy)
    last = study.trials[-1]
    assert last.state.name == "COMPLETE" and last.user_attrs[V.HASH] == again.user_attrs[V.HASH]
    assert (counted.control, counted.measure) == (0, 0)    # nothing timed again
    assert _speed(last) == _speed(again)
    assert last.user_attrs[V.SPEED]["measured_in_trial"] == again.number
    assert last.values[1] == pytest.approx(1.0 / _speed(again)[0])


def test_pruned_trials_carry_their_speedup_too(tmp_path):
    # the screen prunes every operator before its training (threshold out of reach): measured before it
    config = SearchConfig(trials=2, epochs=1, seed=2, finalists=0, tracking_uri=None, screen="naswot",
                          screen_threshold=1e9, storage=f"sqlite:///{tmp_path / 'syno.db'}", trial_timeout=None)
    study = run_search(config, out=None).study
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    assert len(pruned) == 2 and all(V.SCREENED in t.user_attrs for t in pruned)
    for t in pruned:
        ratio, low, high = _speed(t)
        assert 0 < low <= ratio <= high and t.values is None


def test_a_target_this_machine_cannot_run_falls_back_to_the_planned_cost(tmp_path, monkeypatch):
    def no_cuda(target):   # as runtime.device.why_not_runnable says on a machine without CUDA (also on a GPU one)
        return "torch sees no CUDA device here" if target.cuda else None

    monkeypatch.setattr(trial_speed_module, "why_not_runnable", no_cuda)
    out = io.StringIO()
    config = SearchConfig(trials=1, epochs=1, accelerator="cpu", speed_target="cuda.eager", finalists=0,
                          tracking_uri=None, storage=f"sqlite:///{tmp_path / 'syno.db'}", trial_timeout=None)
    study = run_search(config, out=out).study
    lines = [line for line in out.getvalue().splitlines() if "speed objective" in line]
    assert lines == ["syno-automl: speed objective: the planned cost ratio (predicted), not measured: --target "
                     "cuda.eager: torch sees no CUDA device here; the pareto front and the MCTS reward use the plan"]
    assert study.user_attrs[V.SPEED_OBJECTIVE]["objective"] == "planned"
    assert study.user_attrs[V.SETTINGS]["speed_objective"] == "measured"   # what was asked, beside what is used
    assert objective_names(study) == ["val_acc", "cost_ratio"]
    op = study.trials[1]
    assert op.state.name == "COMPLETE" and op.values[1] == pytest.approx(op.user_attrs[V.COST_RATIO])
    assert not any(k.startswith("syno.speedup") for t in study.trials for k in t.user_attrs)
    assert MeasurementStore(study).all() == []
    # resumed where the target runs, the study keeps its own (planned): no timing
    monkeypatch.setattr(trial_speed_module, "why_not_runnable", lambda target: None)
    study = run_search(replace(config, trials=2), resume=True, out=None).study
    assert not any(k.startswith("syno.speedup") for t in study.trials for k in t.user_attrs)
