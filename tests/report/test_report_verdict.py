"""The final stage's verdict where users look (issue 26, item 1) and item 7's smaller findings: `report` puts the
re-trained figures first (table and figure) and says when there are none, `show`/`list` print them beside the
search's, the study's MLflow run holds them; pruned runs are not failures, the baseline runs have a cost ratio and
artifacts, `show N` stays light, the canonical-rate table is opt-in and has no nan, a closed pipe ends quietly.

Two small studies share one SQLite storage and one MLflow store (module fixture): `syno` with a final stage (2
trials, 1 finalist × 2 seeds; a 100 pp margin, so the verdict names it) and `screened` without one (its operator
pruned by an unreachable screen threshold, before any training). Nothing here depends on a timing."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli_env, cli_here
from mlflow.tracking import MlflowClient

from syno_automl import vocabulary as V
from syno_automl.config import SearchConfig
from syno_automl.study import run_search


def _config(folder: Path, **kw) -> SearchConfig:
    # operators of at most 6 primitives (the tree's decision in a fraction of the time) and the planned speed
    # objective (no whole-model timing before each trial): what is read here is the final stage's
    base = dict(trials=2, epochs=1, seed=0, storage=f"sqlite:///{folder / 'syno.db'}",
                tracking_uri=f"sqlite:///{folder / 'mlflow.db'}", finalists=1, final_seeds=2, final_epochs=1,
                final_margin=1.0, heartbeat=None, max_depth=6, speed_objective="planned")
    return SearchConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("verdict")
    result = run_search(_config(folder), out=io.StringIO())
    screened = run_search(_config(folder, study="screened", trials=1, finalists=0, screen="naswot",
                                  screen_threshold=1e9), out=io.StringIO())
    assert result.final is not None and result.final.candidates, "no finalist: nothing to show"
    return folder, result, screened


def _cli(folder: Path, *args: str) -> str:
    """`syno-automl ARGS` in this process: its output (the subprocess ones are kept for what needs a fresh
    interpreter)."""
    return cli_here(folder, *args).stdout


def _client(folder: Path, monkeypatch: pytest.MonkeyPatch | None = None) -> MlflowClient:
    """MLflow's client of the search's store; with `monkeypatch`, run from the search folder, where MLflow resolves
    the store's artifact paths (relative to it: tracking/store.py), as a user's client or `mlflow ui` would."""
    if monkeypatch is not None:
        monkeypatch.chdir(folder)
    return MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")


def _runs(folder: Path, study: str) -> list:
    client = _client(folder)
    exp = client.get_experiment_by_name("syno-automl")
    return list(client.search_runs([exp.experiment_id], filter_string=f"tags.`{V.TAG_STUDY}` = '{study}'"))


def test_report_shows_the_verdict_first_with_its_figure(searched, monkeypatch) -> None:
    folder, result, _ = searched
    final = result.final
    _cli(folder, "report", "--out", "report")
    text = (folder / "report" / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## Verdict: the final stage") and "2 seeds × 1 epoch" in headings[0]
    assert f"**{final.verdict()}**" in text
    for f in [final.baseline, *final.candidates]:
        row = next(line for line in text.splitlines() if line.startswith(f"| {f.label} ") or
                   line.startswith(f"| **{f.label}** "))
        assert f.figure() in row and f"{f.speedup:.2f}×" in row, row
    named = final.chosen
    assert named is not None and f"| **{named.label}** (named) |" in text
    assert text.index("## Verdict") < text.index("## Trials (the search's figures)")
    for name in ("final.png", "final.svg", "pareto_cost.svg", "pareto_flops.svg"):
        assert (folder / "report" / name).stat().st_size > 1000, name
    # the re-trained means are drawn on the Pareto plots too, beside the search's points
    assert "final stage: re-trained mean" in (folder / "report" / "pareto_cost.svg").read_text()
    client = _client(folder, monkeypatch)
    logged = {a.path for a in client.list_artifacts(result.parent_run_id, "report")}
    assert {"report/final.png", "report/final.svg", "report/report.md"} <= logged
    # the canonical-rate table is opt-in (it samples the space: most of the report's time before)
    assert "Not computed" in text.split("## Canonical rates")[1]


def test_a_study_without_final_stage_says_so(searched) -> None:
    folder, _, _ = searched
    printed = _cli(folder, "report", "--study", "screened", "--out", "report-screened",
                   "--tracking-uri", "none")
    assert "## Verdict: no final stage" in printed and "not a comparison with the baseline" in printed
    assert "--resume --trials 1 --finalists 3" in printed
    assert not (folder / "report-screened" / "final.png").exists()
    listed = _cli(folder, "show", "--study", "screened", "--tracking-uri", "none")
    assert "no final stage: the values are the search's (one seed × 1 epoch each)" in listed


def test_show_and_list_print_the_retrained_figures_beside_the_search(searched) -> None:
    folder, result, _ = searched
    final, study = result.final, result.study
    listed = _cli(folder, "show")
    assert _cli(folder, "list") == listed
    assert f"final stage (2 seeds × 1 epoch, re-trained alike): {final.verdict()}" in listed
    for f in [final.baseline, *final.candidates]:
        row = next(line for line in listed.splitlines() if re.match(rf"\s+{f.trial}\s", line))
        search = next(t for t in study.trials if t.number == f.trial)
        assert f"{search.values[0]:.4f}  {f.figure()}" in row, row
    named = final.chosen
    shown = _cli(folder, "show", str(named.trial))
    assert f"val_acc: {named.search_value:.4f} (the search's: one seed × 1 epoch each)" in shown
    assert f"final stage: accuracy {named.figure()} (2 seeds × 1 epoch; baseline {final.baseline.figure()})" in shown
    assert "named: the fastest within 100 pp of the baseline" in shown
    assert _cli(folder, "show", "final").splitlines()[0] == shown.splitlines()[0]
    base = _cli(folder, "show", "baseline")
    assert f"final stage: accuracy {final.baseline.figure()}" in base
    exported = _cli(folder, "export", "final", "-o", "op.py", "--tracking-uri", "none")
    assert f"operator {named.label}" in exported and "named: the fastest within 100 pp" in exported


def test_show_prints_the_primitives_once_with_rounded_figures(searched) -> None:
    folder, result, _ = searched
    named = result.final.chosen
    shown = _cli(folder, "show", str(named.trial), "--tracking-uri", "none")
    primitives = [line.strip() for line in shown.splitlines() if line.startswith("  ")]
    assert primitives and all(shown.count(p) == primitives.count(p) for p in primitives), shown
    assert "primitives:" not in shown
    assert not re.search(r"\d\.\d{5,}", shown), shown  # no 0.7306306306306306, no 425197568.0
    assert re.search(r"cost ratio: \d\.\d{3}x\n", shown) and re.search(r"FLOPs: [\d,]+\n", shown)


def test_show_n_imports_neither_torch_nor_mlflow(searched) -> None:
    folder, result, _ = searched
    number = result.final.chosen.trial
    script = ("import sys\nfrom syno_automl.cli import main\ncode = main(['show', sys.argv[1]])\n"
              "print('HEAVY', sorted(m for m in ('torch', 'lightning', 'mlflow', 'matplotlib') if m in sys.modules))\n"
              "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script, str(number)], cwd=folder, env=cli_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # the MLflow run's status and artifacts, read from the local store without MLflow
    assert "(FINISHED; artifacts: graph.dot, graph.svg, operator.json, operator.py, weights.pt)" in done.stdout
    assert "HEAVY []" in done.stdout, done.stdout


def test_the_study_run_holds_the_verdict(searched, monkeypatch) -> None:
    folder, result, _ = searched
    client = _client(folder, monkeypatch)
    parent = client.get_run(result.parent_run_id)
    final = result.final
    from syno_automl.tracking.ui import escape_markdown

    # the description is Markdown: the verdict escaped (s^-1*H no emphasis), so that the page shows it as written
    assert f"**{escape_markdown(final.verdict())}**" in parent.data.tags["mlflow.note.content"]
    assert parent.data.tags[V.TAG_FINAL_HASH] == final.chosen.label
    stored = json.loads(Path(client.download_artifacts(result.parent_run_id, V.ARTIFACT_FINAL,
                                                       str(folder / "dl"))).read_text())
    assert stored == json.loads(json.dumps(result.study.user_attrs[V.FINAL]))


def test_baseline_runs_have_a_cost_ratio_and_artifacts(searched, monkeypatch) -> None:
    folder, _, _ = searched
    client = _client(folder, monkeypatch)
    runs = {r.info.run_name: r for r in _runs(folder, "syno")}
    for name in ("trial-0-baseline", "final-baseline"):
        run = runs[name]
        assert run.data.metrics["cost_ratio"] == 1.0 and run.data.metrics["cost"] > 0, name
        assert V.ARTIFACT_BASELINE in {a.path for a in client.list_artifacts(run.info.run_id)}, name
    finalists = [r for n, r in runs.items() if n.startswith("final-") and n != "final-baseline"]
    assert finalists and all(0 < r.data.metrics["cost_ratio"] < 1 for r in finalists)


def test_pruned_trials_are_finished_runs_with_their_reason(searched) -> None:
    folder, _, screened = searched
    pruned = [t for t in screened.study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "the screen threshold should prune the operator"
    run = _client(folder).get_run(pruned[0].user_attrs[V.RUN_ID])
    assert run.info.status == "FINISHED" and run.data.tags[V.TAG_PRUNED]


def test_a_reader_that_leaves_ends_the_command_quietly(searched) -> None:
    folder, _, _ = searched
    read, write = os.pipe()
    os.close(read)  # the reader left before the first line (`show | head -0`): every write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "syno_automl.cli", "show", "--tracking-uri", "none"],
                              cwd=folder, env=cli_env(), stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == "", done.stderr


# -- without the studies: the stored verdict read back, the tables


def _result(maximize: bool = True, unit: str = "epochs", candidates: bool = True):
    from syno_automl.study.verdict import Finalist, FinalResult

    base = Finalist("baseline", 0, "the original layers", 1.0, 0.81, [0.81, 0.71], speedup=1.0, latency_ms=15.7)
    ops = [Finalist("ad6c0141110ce7ad", 1, "grouped conv2d", 0.59, 0.62, [0.58, 0.62], speedup=1.46),
           Finalist("af58e7e4454535e6", 2, "SPLIT C_in", 0.73, 0.75, [0.53, 0.55], speedup=1.34,
                    failures=["seed 2: ValueError: nan"])] if candidates else []
    if not candidates:
        base.values = []
    return FinalResult(base, ops, seeds=2, epochs=1, margin=0.3 if maximize else 0.01, timing="torch eager",
                       metric="accuracy" if maximize else "val_loss", maximize=maximize, unit=unit)


@pytest.mark.parametrize("maximize, unit", [(True, "epochs"), (False, "steps")])
def test_the_stored_verdict_reads_back_as_the_search_judged(maximize, unit) -> None:
    from syno_automl.study.verdict import FinalResult

    result = _result(maximize, unit)
    stored = json.loads(json.dumps(result.to_dict()))   # as the study attribute keeps it
    again = FinalResult.from_dict(stored)
    assert again.verdict() == result.verdict() == stored["verdict"]
    assert (again.chosen.label if again.chosen else None) == stored["chosen"]
    assert again.to_dict() == stored and again.unit == unit


def test_the_verdict_table_marks_the_named_operator_and_the_margin() -> None:
    from syno_automl.report.final import final_table

    result = _result()  # margin 30 pp: ad6c... (-16 pp, 1.46x) is named, af58... (-22 pp) within but slower
    rows = final_table(result).splitlines()
    assert rows[0].startswith("| model | trial | description | accuracy re-trained (mean ± sd) | vs baseline | "
                              "within 30 pp | speedup |")
    assert rows[3] == ("| **ad6c0141110ce7ad** (named) | 1 | grouped conv2d | 0.600 ± 0.028 | -16.0 pp | yes | 1.46× "
                       "| 0.590x | 0.6200 |")
    assert "0.540 ± 0.014 (1 seed failed) | -22.0 pp | yes | 1.34×" in rows[4]


def test_a_baseline_never_retrained_is_not_shown_as_failed() -> None:
    from syno_automl.cli.lookup import trial_line

    result = _result(candidates=False)   # no operator qualified: the baseline was not re-trained either
    assert result.of_trial(0) is None
    trial = optuna.trial.create_trial(value=0.81, user_attrs={V.BASELINE: True, V.FLOPS_RATIO: 1.0})
    trial.number = 0
    line = trial_line(trial, "val_acc", result)
    assert "failed" not in line and "  0.8100  -  " in line


def test_the_canonical_rate_table_has_no_nan() -> None:
    from syno_automl.report import canonical_rate_table

    table = canonical_rate_table({"depths": [{"depth": 7, "candidates": 8, "canonical": 6},
                                             {"depth": 8, "candidates": 0, "canonical": 0}]})
    assert table.splitlines()[-2:] == ["| 7 | 8 | 6 | 0.750 |", "| 8 | 0 | 0 | - |"]
