"""`syno-automl report` shows the figures found after the search beside the search's own: `reevaluate`'s (MLflow
runs tagged ``syno.role = reevaluation``, the baseline retrained at the same budget) and `tune`'s (study attr
``syno.latency``), labelled ("re-evaluated at 2 epochs", "tune: eager"), in report.md and the plots. The label of a
MetaSchedule-tuned figure ("tune: tuned 2 trials") is checked beside its tuning, in tests/cli/test_cli_tune.py."""
from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli_here, read_runs, read_study
from _syno_helpers import tiny_space
from mlflow.tracking import MlflowClient

from syno_automl import vocabulary as V
from syno_automl.report import (
    latency_figures,
    latency_series,
    latency_table,
    reevaluation_series,
    reevaluation_table,
    reevaluations_of,
)
from syno_automl.tracking import SearchTracker

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _row(text: str, start: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(start))
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


# -- the pieces, on a real Optuna study and a real MLflow store ---------------------------------------------------
def _study_with(tmp_path: Path, ops) -> optuna.Study:
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}", direction="maximize")
    study.set_user_attr(V.SETTINGS, {"task": "image", "epochs": 1, "model": "small_cnn", "dataset": "digits",
                                     "seed": 0})
    study.add_trial(optuna.create_trial(value=0.5, user_attrs={V.BASELINE: True, V.FLOPS_RATIO: 1.0}))
    for i, op in enumerate(ops):
        study.add_trial(optuna.create_trial(value=0.3 + 0.1 * i, user_attrs={
            V.HASH: op.hash, V.FLOPS_RATIO: 0.25 * (i + 1),
            V.LATENCY: {"llvm": {"latency_ms": 2.0 + i, "baseline_ms": 4.0, "speedup": 4.0 / (2.0 + i),
                                 "tuned_trials": 0, "tag": "untuned"}}}))
    return study


def test_reevaluations_are_read_from_mlflow_and_labelled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ops = tiny_space().sample(2, seed=5)
    study = _study_with(tmp_path, ops)
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    settings = {"task": "image", "epochs": 10, "model": "small_cnn", "dataset": "digits", "seed": 0}

    def reevaluate(op, number, value, status="FINISHED", **changed):
        run = tracker.reevaluation_run("s", op, None, number, {**settings, **changed})
        if value is not None:
            run.log_metrics({"val_acc": value}, step=1)
        if status == "FAILED":
            run.log_failure("NonFiniteLossError: nan")
        run.finish(status)

    reevaluate(None, 0, 0.8)
    reevaluate(ops[0], 1, 0.7)
    reevaluate(ops[0], 1, 0.75)                      # again, same label: the latest run counts
    reevaluate(ops[1], 2, None, status="FAILED")
    reevaluate(ops[1], 2, 0.6, dataset="mnist")     # another dataset: its own label
    tracker.trial_run(tracker.study_run("s", {}), "s", 1, ops[0]).finish()  # a search run: not a re-evaluation
    found = reevaluations_of(tracker.reevaluation_runs("s"), study, "val_acc")
    by = {(r.hash, r.label): r for r in found}
    assert len(found) == 4
    assert by[(None, "re-evaluated at 10 epochs")].value == 0.8
    assert by[(ops[0].hash, "re-evaluated at 10 epochs")].value == 0.75
    assert by[(ops[0].hash, "re-evaluated at 10 epochs")].flops_ratio == 0.25  # the search trial's
    failed = by[(ops[1].hash, "re-evaluated at 10 epochs")]
    assert failed.value is None and failed.status == "FAILED" and "nan" in failed.reason
    assert by[(ops[1].hash, "re-evaluated at 10 epochs (dataset mnist)")].value == 0.6
    table = reevaluation_table(found, study, "val_acc")
    assert "val_acc (search, 1 epoch)" in table
    row = _row(table, f"| 1 | {ops[0].hash} |")
    assert row[2:6] == ["0.3000", "0.7500", "re-evaluated at 10 epochs", "-0.0500"]  # vs the re-evaluated baseline
    row = _row(table, f"| 2 | {ops[1].hash} | 0.4000 | 0.6000 |")
    assert row[5] == "-"  # no baseline re-evaluated on mnist: nothing to compare with
    assert "FAILED: NonFiniteLossError: nan" in table
    series = {s.label: s for s in reevaluation_series(found)}
    assert sorted(series) == ["re-evaluated at 10 epochs", "re-evaluated at 10 epochs (dataset mnist)"]
    assert sorted((p.trial, p.baseline, p.value) for p in series["re-evaluated at 10 epochs"].points) == [
        (0, True, 0.8), (1, False, 0.75)]
    assert reevaluation_table([], study, "val_acc").startswith("No trial was re-evaluated")


def test_tuned_latencies_beside_the_search_ones(tmp_path):
    ops = tiny_space().sample(2, seed=5)
    study = _study_with(tmp_path, ops)
    study.set_user_attr(V.LATENCY, {ops[1].hash: {"llvm": {"latency_ms": 1.5, "baseline_ms": 3.0, "speedup": 2.0,
                                                           "tuned_trials": 64, "tag": "tuned 64 trials"}}})
    figures = latency_figures(study)
    assert [(f.trial, f.source, f.label) for f in figures] == [
        (1, "search", "search: untuned"), (2, "search", "search: untuned"), (2, "tune", "tune: tuned 64 trials")]
    series = latency_series(study, "llvm")
    assert [s.label for s in series] == ["search: untuned", "tune: tuned 64 trials"]
    assert sorted((p.trial, p.cost, p.baseline) for p in series[0].points) == [(0, 4.0, True), (1, 2.0, False),
                                                                              (2, 3.0, False)]
    assert sorted((p.trial, p.cost, p.baseline) for p in series[1].points) == [(0, 3.0, True), (2, 1.5, False)]
    table = latency_table(study)
    row = _row(table, f"| 2 | {ops[1].hash} | llvm |")
    assert row[3] == "3 ms vs 4.0000 ms, 1.33x (search: untuned)"
    assert row[4] == "1.5 ms vs 3.0000 ms, 2.00x (tune: tuned 64 trials)"
    assert _row(table, f"| 1 | {ops[0].hash} | llvm |")[4] == "-"


# -- the real CLI: search -> reevaluate -> tune -> report -----------------------------------------------------------
#: the operator lists `reevaluate` timed (speed.sessions.measure_final), call by call
TIMED: list[list[str]] = []


@pytest.fixture(scope="module")
def worked(tmp_path_factory) -> Path:
    """A tiny search (eager-PyTorch latency measured by the search), the best operator and the baseline
    re-evaluated at 2 epochs, the best operator's latency measured again by `tune`."""
    from syno_automl.speed import sessions

    folder = tmp_path_factory.mktemp("report")
    # single-objective: these tests read study.best_trial (test_search_pareto.py covers the pareto report)
    # one operator trial: the report's rows are the best trial's and the baseline's; the planned speed objective: the
    # figures read here are --latency's, reevaluate's and tune's, not the trials' measured speedups
    cli_here(folder, "search", "--trials", "1", "--epochs", "1", "--timeout", "0", "--seed", "1", "--cost-ratio",
             "0", "--latency", "torch", "--latency-margin", "-1", "--objective", "accuracy", "--finalists", "0",
             "--speed-objective", "planned")
    measure_final = sessions.measure_final

    def counted(subject, ops, **kw):
        TIMED.append([op.hash for op in ops])
        return measure_final(subject, ops, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sessions, "measure_final", counted)
        cli_here(folder, "reevaluate", "best", "--epochs", "2", "--seed", "1")
    cli_here(folder, "tune", "best", "--target", "torch", "--no-inductor")
    return folder


def test_reevaluate_times_the_baseline_and_the_operators_together_once(worked):
    """The original against itself (the baseline's figure) and each operator, in the same sessions: the control is
    not timed again for each model re-trained."""
    best = read_study(worked).best_trial
    assert TIMED == [[best.user_attrs["syno.hash"]]]


@pytest.mark.slow
def test_report_shows_reevaluated_and_tuned_figures(worked, tmp_path, monkeypatch):
    folder = tmp_path / "copy"
    shutil.copytree(worked, folder)
    cli_here(folder, "report")
    study = read_study(folder)
    text = (folder / "report" / "report.md").read_text()
    runs = {r.data.tags.get("syno.hash"): r for r in read_runs(folder)
            if r.data.tags.get("syno.role") == "reevaluation"}
    assert set(runs) == {"baseline", study.best_trial.user_attrs["syno.hash"]}
    section = _section(text, "Re-evaluated")
    assert "val_acc (search, 1 epoch)" in section
    base = _row(section, "| 0 | baseline |")
    assert base[2] == f"{study.trials[0].value:.4f}"  # the search's figure, beside
    assert base[3] == f"{runs['baseline'].data.metrics['val_acc']:.4f}" and base[4] == "re-evaluated at 2 epochs"
    best = study.best_trial
    row = _row(section, f"| {best.number} | {best.user_attrs['syno.hash']} |")
    again = runs[best.user_attrs["syno.hash"]].data.metrics["val_acc"]
    assert row[2:5] == [f"{best.value:.4f}", f"{again:.4f}", "re-evaluated at 2 epochs"]
    assert row[5] == f"{again - runs['baseline'].data.metrics['val_acc']:+.4f}"
    assert row[7] == runs[best.user_attrs["syno.hash"]].info.run_id and row[8] == "FINISHED"

    section = _section(text, "Latency")
    row = _row(section, f"| {best.number} | {best.user_attrs['syno.hash']} | torch |")
    searched = best.user_attrs["syno.latency"]["torch"]
    tuned = study.user_attrs["syno.latency"][best.user_attrs["syno.hash"]]["torch"]
    assert row[3].startswith(f"{searched['latency_ms']:.4g} ms vs ") and row[3].endswith("(search: eager)")
    assert row[4].startswith(f"{tuned['latency_ms']:.4g} ms vs ") and row[4].endswith("(tune: eager)")

    flops_svg = (folder / "report" / "pareto_flops.svg").read_text()
    for label in ("operators (search, 1 epoch)", "re-evaluated at 2 epochs", "baseline, re-evaluated at 2 epochs"):
        assert label in flops_svg, label
    latency_svg = (folder / "report" / "pareto_latency_torch.svg").read_text()
    assert "search: eager" in latency_svg and "tune: eager" in latency_svg
    # the report is also kept on the study's MLflow run
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    monkeypatch.chdir(folder)  # MLflow resolves the store's relative artifact paths against the working folder
    logged = {a.path for a in client.list_artifacts(study.user_attrs["syno.mlflow_run_id"], "report")}
    assert "report/report.md" in logged

    cli_here(folder, "report", "--tracking-uri", "none", "--out", "offline")
    offline = (folder / "offline" / "report.md").read_text()
    assert "Not read: re-evaluations are kept in MLflow runs" in _section(offline, "Re-evaluated")
    assert "(tune: eager)" in _section(offline, "Latency")  # tune's figures live in the study
