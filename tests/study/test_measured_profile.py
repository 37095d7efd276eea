"""`syno-automl calibrate --from-study` (syno_automl.study.measured_profile): a cost profile fitted to the speedups a
search's trials measured. The study here is a real SQLite study holding operators of the default space and
measurements made up from a hidden cost model (the fit is checked against it); nothing is timed."""
from __future__ import annotations

import json
import math

import optuna
import pytest
from _cli_helpers import cli_here
from scipy.stats import spearmanr

from syno_automl import cost_profile
from syno_automl import vocabulary as V
from syno_automl.calibrate import features
from syno_automl.config import SearchConfig
from syno_automl.errors import CostProfileError
from syno_automl.speed.paired import SpeedupEstimate
from syno_automl.speed.store import Measurement, MeasurementKey, MeasurementStore
from syno_automl.study import prepare
from syno_automl.study.measured_profile import MIN_MEASUREMENTS, measured_rows, profile_from_study

HIDDEN = (2e-12, 4e-10, 1e-10, 3e-6)   # seconds per FLOP, element written, element read, kernel launch
REST_S = 0.004                        # the model's time outside the replaced layers
BASELINE_S = 0.010


@pytest.fixture(scope="module")
def context():
    return prepare(SearchConfig(tracking_uri=None, max_depth=6, speed_objective="planned"))


def _hidden_seconds(context, op) -> float:
    per_layer = [features(op.cost(i), False, inference=True) for i in range(context.space.num_mappings)]
    return REST_S + sum(c * sum(col) for c, col in zip(HIDDEN, zip(*per_layer)))


def _study(context, storage: str, count: int, **key_changes: str) -> optuna.Study:
    """A study with `count` trials of sampled operators, each measured by the hidden model (its settings recorded as
    a search records them)."""
    study = optuna.create_study(storage=storage, study_name="syno", directions=["maximize", "minimize"])
    study.set_user_attr(V.SETTINGS, context.config.settings())
    store = MeasurementStore(study)
    for number, op in enumerate(context.space.sample(count, seed=11)):
        trial = study.ask()
        trial.set_user_attr(V.OPERATOR, op.to_json())
        trial.set_user_attr(V.HASH, op.hash)
        study.tell(trial, [0.9, 1.0])
        ratio = BASELINE_S / _hidden_seconds(context, op)
        key = MeasurementKey(op.hash, "[]", **{"target": "cpu.eager", "precision": "fp32",
                                                "device": "cpu (1 thread), AMD EPYC", "torch": "2.13.0",
                                                **key_changes})
        store.put(Measurement(key, SpeedupEstimate(ratio, ratio * 0.98, ratio * 1.02, 12, BASELINE_S * 1e3,
                                                   BASELINE_S * 1e3 / ratio), trial=number))
    store.put(Measurement(MeasurementKey("baseline", "[]", "cpu.eager", "fp32", "cpu (1 thread), AMD EPYC", "2.13.0"),
                          SpeedupEstimate(1.0, 0.99, 1.01, 12, BASELINE_S * 1e3, BASELINE_S * 1e3), trial=0))
    return study


def test_the_profile_fits_what_the_trials_measured(context):
    study = _study(context, "sqlite:///:memory:", 12)
    profile = profile_from_study(study, context, "cpu.eager")
    _, seconds, used = measured_rows(study, context, "cpu.eager")
    assert len(used) == 12 and all(m.key.operator != "baseline" for m in used)
    ops = {op.hash: op for op in context.space.sample(12, seed=11)}
    # the plan's own pricing (CostProfile.total, native/cost.hpp's formula) of each operator at every layer
    planned = [sum(profile.total(ops[m.key.operator].cost(i)) for i in range(context.space.num_mappings))
               for m in used]
    assert spearmanr(planned, seconds).statistic > 0.95
    assert profile.step == "inference" and profile.target == "cpu.eager" and profile.device.startswith("cpu")
    assert profile.fit["programs"] == 12 and profile.fit["median_abs_log_error"] < 0.05
    assert math.isclose(profile.fit["intercept_s"], REST_S, rel_tol=0.25)   # the rest of the model
    assert "calibrate --from-study: 12 operators" in profile.source


def test_only_the_target_and_its_most_common_conditions_count(context):
    study = _study(context, "sqlite:///:memory:", 7, target="cpu.compiled")
    with pytest.raises(CostProfileError, match=r"0 operator measurement\(s\) on cpu.eager.*at least 6"):
        profile_from_study(study, context, "cpu.eager")
    assert len(measured_rows(study, context, "cpu.compiled")[2]) == 7


def test_too_few_measurements_are_refused_with_what_to_do(context):
    study = _study(context, "sqlite:///:memory:", MIN_MEASUREMENTS - 1)
    with pytest.raises(CostProfileError, match="--speed-objective measured"):
        profile_from_study(study, context, "cpu.eager")


def test_the_command_writes_a_profile_that_a_search_loads(context, tmp_path):
    _study(context, f"sqlite:///{tmp_path / 'syno.db'}", 8)
    done = cli_here(tmp_path, "calibrate", "--from-study", "--target", "cpu.eager", "--out", "measured.json",
                    "--max-depth", "6")
    assert "wrote measured.json" in done.stdout, done.stdout + done.stderr
    profile = cost_profile.load(tmp_path / "measured.json")
    assert profile.step == "inference" and json.loads((tmp_path / "measured.json").read_text())["fit"]["programs"] == 8
