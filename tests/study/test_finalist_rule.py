"""One finalist rule (issue 46, item 5): the README, docs/search.md and `search --help` state it in the same words
(settings.FINALIST_RULE), and it is the rule `choose_finalists` runs: faster than the original in the trial by the
study's speed objective (a measured time ratio, not the planned cost, where the study measured). A finalist whose
trial value is more than 5× the margin behind the baseline's is not re-trained, and the final table says why.

Deterministic: training replaced by a value fixed per trial (study.training.train_operator), the final stage's
timing by a fixed speedup (finalists.measure_final); real SQLite Optuna storage, no MLflow."""
from __future__ import annotations

import io
import re
from pathlib import Path

import optuna
import pytest

import syno_automl.study.training as training
from syno_automl import vocabulary as V
from syno_automl.cli import build_parser
from syno_automl.config import SearchConfig
from syno_automl.settings import FINALIST_RULE
from syno_automl.speed.paired import SpeedupEstimate
from syno_automl.study import finalists, run_search
from syno_automl.study.finalists import FAR_OUTSIDE, choose_finalists, far_outside
from syno_automl.study.verdict import FinalResult, stored_final

ROOT = Path(__file__).resolve().parents[2]
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _squeezed(text: str) -> str:
    """The text without whitespace or Markdown backticks (a wrapped line, or argparse's, reads the same)."""
    return re.sub(r"[\s`]", "", text)


def test_the_readme_the_docs_and_the_help_state_the_one_rule():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    help_text = sub.choices["search"].format_help()
    for where, text in (("README.md", (ROOT / "README.md").read_text()),
                        ("docs/search.md", (ROOT / "docs" / "search.md").read_text()), ("search --help", help_text)):
        assert _squeezed(FINALIST_RULE) in _squeezed(text), where
    assert "cheaper than the replaced layers (best first)" not in help_text   # the old, wrong rule


def _study(tmp_path: Path, objective: str) -> optuna.Study:
    """A pareto study whose second objective is `objective` (time_ratio: measured; cost_ratio: planned), with the
    baseline and two operators: one measured faster but planned dearer, one planned cheaper but measured slower."""
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", directions=["maximize", "minimize"])
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["val_acc", objective])
    study.add_trial(optuna.trial.create_trial(values=[0.95, 1.0], user_attrs={V.BASELINE: True, V.HASH: "base"}))
    for name, acc, time_ratio, cost_ratio in (("measured_faster", 0.94, 0.8, 1.3), ("planned_cheaper", 0.94, 1.2, 0.6)):
        second = time_ratio if objective == "time_ratio" else cost_ratio
        study.add_trial(optuna.trial.create_trial(values=[acc, second],
                                                  user_attrs={V.HASH: name, V.COST_RATIO: cost_ratio}))
    return study


@pytest.mark.parametrize("objective, chosen", [("time_ratio", "measured_faster"), ("cost_ratio", "planned_cheaper")])
def test_the_finalists_are_those_faster_by_the_studys_own_speed_objective(tmp_path, objective, chosen):
    assert [t.user_attrs[V.HASH] for t in choose_finalists(_study(tmp_path, objective), 3)] == [chosen]


def test_far_outside_is_more_than_five_margins_behind_the_baseline():
    assert FAR_OUTSIDE == 5
    assert far_outside(0.94, 0.95, 0.01, maximize=True) is None
    assert far_outside(0.90, 0.95, 0.01, maximize=True) is None   # exactly 5 margins: still re-trained
    why = far_outside(0.47, 0.981, 0.01, maximize=True)
    assert why == ("not re-trained: its trial's val_acc 0.470 is 51.1 pp below the baseline's 0.981, more than 5× "
                   "the 1 pp margin")
    assert far_outside(2.2, 2.0, 0.01, maximize=False, metric="val_loss").startswith(
        "not re-trained: its trial's val_loss 2.200 is 0.2 nats above the baseline's 2.000")
    assert far_outside(2.04, 2.0, 0.01, maximize=False) is None
    assert far_outside(0.1, 0.95, 0.0, maximize=True) is None   # a margin of 0 judges nothing
    assert far_outside(None, 0.95, 0.01, maximize=True) is None


# trial 1: within the noise of the baseline; trial 2: 45 pp behind (far outside 5 x 1 pp); trial 3: 3 pp behind
TRIAL_VALUES = {1: 0.94, 2: 0.50, 3: 0.92}


def _train(calls: list):
    def train(context, trial, run, operator=None, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        if trial is None:   # the final stage: the operator's (None: the baseline) trial value
            calls.append(operator.hash if operator is not None else "baseline")
            return trial_values.get(operator.hash, 0.95) if operator is not None else 0.95
        if trial.user_attrs.get(V.BASELINE):
            return 0.95
        trial.set_user_attr(V.COST_RATIO, 0.5)   # a finalist must be faster than the replaced layers
        trial_values[trial.user_attrs[V.HASH]] = TRIAL_VALUES[trial.number]
        return TRIAL_VALUES[trial.number]
    trial_values: dict[str, float] = {}
    return train


def _timed(subject, ops, **kw):  # noqa: ANN001, ANN003 - measure_final's signature
    estimate = SpeedupEstimate(1.3, 1.25, 1.35, pairs=2, baseline_ms=10.0, candidate_ms=10.0 / 1.3)
    return finalists.SpeedMeasurement("cpu.eager: fixed for the test", [estimate for _ in ops],
                                      SpeedupEstimate(1.0, 0.99, 1.01, 2, 10.0, 10.0), baseline_ms=10.0)


def _search(tmp_path: Path, monkeypatch, calls: list, **kw) -> tuple[FinalResult, optuna.Study, str]:
    monkeypatch.setattr(training, "train_operator", _train(calls))
    monkeypatch.setattr(finalists, "measure_final", _timed)
    config = SearchConfig(**{**dict(trials=3, epochs=1, seed=0, storage=f"sqlite:///{tmp_path / 'syno.db'}",
                                    tracking_uri=None, heartbeat=None, opening="none", max_depth=6,
                                    speed_objective="planned", finalists=3, final_seeds=1, final_epochs=1), **kw})
    out = io.StringIO()
    result = run_search(config, out=out)
    return result.final, result.study, out.getvalue()


def test_a_finalist_far_outside_the_margin_is_not_retrained_and_the_table_says_why(tmp_path, monkeypatch):
    calls: list[str] = []
    final, study, printed = _search(tmp_path, monkeypatch, calls)
    hashes = {t.number: t.user_attrs.get(V.HASH) for t in study.trials}
    far, kept = hashes[2], [hashes[1], hashes[3]]
    assert sorted(calls) == sorted(["baseline", *kept])   # the far one was not trained
    assert sorted(f.label for f in final.candidates) == sorted(kept)
    assert [f.label for f in final.skipped] == [far]
    why = ("not re-trained: its trial's val_acc 0.500 is 45.0 pp below the baseline's 0.950, more than 5× the 1 pp "
           "margin")
    assert final.skipped[0].skipped == why
    row = next(line for line in final.table() if far in line)
    assert "not re-trained" in row and row.endswith(f"({why})")
    assert "1 more not re-trained" in printed and why in printed
    stored = stored_final(study)   # what show and report read: the row and its reason kept
    assert stored is not None and [f.skipped for f in stored.skipped] == [why]
    assert stored.verdict() == final.verdict() and final.chosen is not None and final.chosen.label in kept


def test_when_every_finalist_is_far_outside_nothing_is_retrained_and_the_verdict_says_why(tmp_path, monkeypatch):
    calls: list[str] = []
    # a margin of 0.1 pp: 5 margins are 0.5 pp, and the best trial (0.94) is 1 pp behind the baseline's 0.95
    final, study, printed = _search(tmp_path, monkeypatch, calls, final_margin=0.001)
    assert calls == [] and final.candidates == [] and len(final.skipped) == 3
    assert final.verdict() == ("no operator within 0.1 pp of the baseline (every finalist's trial value is more than "
                               "5× --final-margin from the baseline's: none to re-train)")
    assert "final stage: no finalist (every finalist's trial value" in printed
    assert all(f.skipped and f.skipped.startswith("not re-trained: its trial's val_acc") for f in final.skipped)
