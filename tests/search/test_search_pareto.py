"""A real small pareto search (the default objective) through the CLI: SQLite study, MLflow sqlite store, digits.

Two objectives (val_acc, cost_ratio), the baseline reported at (its accuracy, 1.0) and infeasible, so that
study.best_trials is the operators' front; the companion study holds the per-epoch values the pruner reads; the
report draws and lists that front. `--objective accuracy` keeps the single-objective study, and a study recorded
before the option existed resumes as one."""
from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli_here, read_runs, read_study

from syno_automl import vocabulary as V
from syno_automl.search.objectives import best_operator_trial, operator_front

# no final stage: its multi-objective ranking is test_search_finalists.py's (it would re-train 4 models 3 times)
# the planned speed objective (cost_ratio): the measured one (time_ratio) is tests/study/test_trial_speed.py's
# 2 trials: with seed 3 the first completes (the front) and the second is pruned at epoch 1 (the pruner's reason)
SEARCH = ("search", "--trials", "2", "--epochs", "2", "--seed", "3", "--timeout", "0", "--pruner", "halving",
          "--finalists", "0", "--speed-objective", "planned")


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("pareto")
    out = cli_here(folder, *SEARCH).stdout  # in process: seconds of imports saved; it only reads the study
    cli_here(folder, "report")
    return folder, out


def test_the_default_study_has_two_objectives_and_the_front_excludes_the_baseline(searched):
    folder, out = searched
    study = read_study(folder)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert study.metric_names == ["val_acc", "cost_ratio"]
    assert study.user_attrs[V.SETTINGS]["objective"] == "pareto"
    base = study.trials[0]
    assert base.user_attrs[V.BASELINE] and base.values[1] == 1.0
    assert base.constraints[V.BASELINE_CONSTRAINT] > 0       # infeasible: never on the front
    done = [t for t in study.trials[1:] if t.state.name == "COMPLETE"]
    assert done, out
    for t in done:   # the second value is the planned cost ratio of the operator
        assert t.values[1] == pytest.approx(t.user_attrs[V.COST_RATIO]) and 0 < t.values[1] <= 1.0
    front = study.best_trials
    assert front and all(not t.user_attrs.get(V.BASELINE) for t in front)
    assert {t.number for t in operator_front(study)} == {t.number for t in front}
    best = best_operator_trial(study)
    assert best.number in {t.number for t in front} and best.values[0] == max(t.values[0] for t in front)
    assert (f"Pareto front (val_acc vs planned cost ratio, study.best_trials): {len(front)} "
            f"operator{'s' if len(front) != 1 else ''}") in out
    with pytest.raises(RuntimeError):
        study.best_trial   # Optuna's single best trial does not exist in a multi-objective study


def test_the_companion_study_holds_the_per_epoch_values(searched):
    folder, _ = searched
    study = read_study(folder)
    companion = optuna.load_study(study_name="syno" + V.FIDELITY_SUFFIX, storage=study._storage)
    assert companion.direction == optuna.study.StudyDirection.MAXIMIZE
    twins = {t.user_attrs[V.SEARCH_TRIAL]: t for t in companion.trials}
    trained = [t for t in study.trials if V.FIDELITY_TRIAL in t.user_attrs]
    assert trained and 0 not in twins       # the baseline does not compete
    for t in trained:
        twin = twins[t.number]
        assert twin.number == t.user_attrs[V.FIDELITY_TRIAL] and twin.state == t.state
        assert 1 in twin.intermediate_values and not t.intermediate_values
        if t.state.name == "COMPLETE":
            assert twin.intermediate_values[2] == pytest.approx(t.values[0])
    for t in study.trials:
        if t.state.name == "PRUNED":
            assert "pruned by SuccessiveHalvingPruner" in t.user_attrs[V.PRUNED]


def test_the_report_draws_and_lists_the_front(searched):
    folder, _ = searched
    study = read_study(folder)
    assert (folder / "report" / "pareto_cost.png").stat().st_size > 0
    svg = (folder / "report" / "pareto_cost.svg").read_text()
    assert "Pareto front" in svg and "baseline" in svg
    text = (folder / "report" / "report.md").read_text()
    section = text.split("## Pareto front", 1)[1].split("\n## ", 1)[0]
    listed = [int(m) for m in re.findall(r"^\| (\d+) \|", section, flags=re.M)]
    assert sorted(listed) == sorted(t.number for t in study.best_trials)
    parent = next(r for r in read_runs(folder) if r.data.tags.get(V.TAG_ROLE) == "study")
    assert parent.data.metrics["front_size"] == len(study.best_trials)
    assert parent.data.tags[V.TAG_BEST_HASH] == best_operator_trial(study).user_attrs[V.HASH]


def test_objective_accuracy_is_single_objective_and_old_studies_resume_as_it(tmp_path):
    cli_here(tmp_path, "search", "--trials", "1", "--epochs", "1", "--objective", "accuracy", "--tracking-uri", "none",
        "--finalists", "0")
    study = read_study(tmp_path)
    assert [d.name for d in study.directions] == ["MAXIMIZE"] and study.best_trial.number == 1
    # a study recorded before --objective and --pruner existed: no such keys, and the milestone of those days
    settings = dict(study.user_attrs[V.SETTINGS])
    for key in ("objective", "pruner", "reward_speedup"):
        settings.pop(key)
    settings["milestones"] = {"1": 0.2}
    study.set_user_attr(V.SETTINGS, settings)
    out = cli_here(tmp_path, "search", "--resume", "--trials", "2", "--tracking-uri", "none", "--finalists", "0").stdout
    study = read_study(tmp_path)
    assert len(study.trials) == 3 and len(study.directions) == 1 and "done in" in out
    mismatch = cli_here(tmp_path, "search", "--resume", "--trials", "3", "--objective", "pareto",
                        "--tracking-uri", "none", check=False)
    assert mismatch.returncode != 0 and "objective" in mismatch.stderr + mismatch.stdout
