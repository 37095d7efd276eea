"""The search's front is read against the study's own speed objective: a measured study's second value (the time
ratio, 1 / measured speedup), a planned study's (the planned cost ratio); never the planned cost attr where the
study was judged on measured time."""
from __future__ import annotations

import optuna
import pytest

from syno_automl import vocabulary as V
from syno_automl.report.front import front_points, front_table
from syno_automl.search.objectives import operator_front, speed_ratio_label

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(metric: str) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.set_metric_names(["val_acc", metric])
    # (value, second objective, planned cost attr): the plan and the measurement order the operators apart
    for value, ratio, planned, op in [(0.90, 0.70, 0.40, "a"), (0.90, 0.80, 0.30, "b"), (0.95, 0.90, 0.20, "c")]:
        study.add_trial(optuna.trial.create_trial(values=[value, ratio],
                                                  user_attrs={V.HASH: op, V.COST_RATIO: planned}))
    return study


@pytest.mark.parametrize("metric, label, header, order", [
    ("time_ratio", "measured time ratio", "| time ratio | measured speedup |", ["a", "c"]),
    ("cost_ratio", "planned cost ratio", "| cost ratio | planned speedup |", ["a", "c"]),
])
def test_the_front_is_read_against_the_studys_second_objective(metric, label, header, order):
    study = _study(metric)
    assert speed_ratio_label(study) == label
    assert [t.user_attrs[V.HASH] for t in operator_front(study)] == order   # by the second value, not the attr
    assert [p.cost for p in front_points(study)] == [0.70, 0.90]
    assert header in front_table(study).splitlines()[0]

