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
from mlflow.tracking import MlflowClient
from test_cli_search import _env

from syno_automl import vocabulary as V
from syno_automl.cli import main
from syno_automl.config import SearchConfig
from syno_automl.study import run_search


def _config(folder: Path, **kw) -> SearchConfig:
    base = dict(trials=2, epochs=1, seed=0, storage=f"sqlite:///{folder / 'syno.db'}",
                tracking_uri=f"sqlite:///{folder / 'mlflow.db'}", finalists=1, final_seeds=2, final_epochs=1,
                final_margin=1.0, heartbeat=None)
    return SearchConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("verdict")
    result = run_search(_config(folder), out=io.StringIO())
    screened = run_search(_config(folder, study="screened", trials=1, finalists=0, screen="naswot",
                                  screen_threshold=1e9), out=io.StringIO())
    assert result.final is not None and result.final.candidates, "no finalist: nothing to show"
    return folder, result, screened


def _cli(folder: Path, capsys: pytest.CaptureFixture, *args: str) -> str:
    """`syno-automl ARGS` in this process (the subprocess ones are kept for what needs a fresh interpreter)."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        capsys.readouterr()
        assert main(list(args)) == 0, capsys.readouterr().err
    finally:
        os.chdir(here)
    return capsys.readouterr().out


def _client(folder: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")


def _runs(folder: Path, study: str) -> list:
    client = _client(folder)
    exp = client.get_experiment_by_name("syno-automl")
    return list(client.search_runs([exp.experiment_id], filter_string=f"tags.`{V.TAG_STUDY}` = '{study}'"))


def test_report_shows_the_verdict_first_with_its_figure(searched, capsys) -> None:
    folder, result, _ = searched
    final = result.final
    _cli(folder, capsys, "report", "--out", "report")
    text = (folder / "report" / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0].startswith("## Verdict: the final stage") and "2 seeds × 1 epochs" in headings[0]
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
    client = _client(folder)
    logged = {a.path for a in client.list_artifacts(result.parent_run_id, "report")}
    assert {"report/final.png", "report/final.svg", "report/report.md"} <= logged
    # the canonical-rate table is opt-in (it samples the space: most of the report's time before)
    assert "Not computed" in text.split("## Canonical rates")[1]


def test_a_study_without_final_stage_says_so(searched, capsys) -> None:
    folder, _, _ = searched
    printed = _cli(folder, capsys, "report", "--study", "screened", "--out", "report-screened",
                   "--tracking-uri", "none")
    assert "## Verdict: no final stage" in printed and "not a comparison with the baseline" in printed
    assert "--resume --trials 1 --finalists 3" in printed
    assert not (folder / "report-screened" / "final.png").exists()
    listed = _cli(folder, capsys, "show", "--study", "screened", "--tracking-uri", "none")
    assert "no final stage: the values are the search's (one seed × 1 epoch each)" in listed


def test_show_and_list_print_the_retrained_figures_beside_the_search(searched, capsys) -> None:
    folder, result, _ = searched
    final, study = result.final, result.study
    listed = _cli(folder, capsys, "show")
    assert _cli(folder, capsys, "list") == listed
    assert f"final stage (2 seeds × 1 epochs, re-trained alike): {final.verdict()}" in listed
    for f in [final.baseline, *final.candidates]:
        row = next(line for line in listed.splitlines() if re.match(rf"\s+{f.trial}\s", line))
        search = next(t for t in study.trials if t.number == f.trial)
        assert f"{search.values[0]:.4f}  {f.figure()}" in row, row
    named = final.chosen
    shown = _cli(folder, capsys, "show", str(named.trial))
    assert f"val_acc: {named.search_value:.4f} (the search's: one seed × 1 epoch each)" in shown
    assert f"final stage: accuracy {named.figure()} (2 seeds × 1 epochs; baseline {final.baseline.figure()})" in shown
    assert "named: the fastest within 100 pp of the baseline" in shown
    assert _cli(folder, capsys, "show", "final").splitlines()[0] == shown.splitlines()[0]
    base = _cli(folder, capsys, "show", "baseline")
    assert f"final stage: accuracy {final.baseline.figure()}" in base


def test_show_prints_the_primitives_once_with_rounded_figures(searched, capsys) -> None:
    folder, result, _ = searched
    named = result.final.chosen
    shown = _cli(folder, capsys, "show", str(named.trial), "--tracking-uri", "none")
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
    done = subprocess.run([sys.executable, "-c", script, str(number)], cwd=folder, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # the MLflow run's status and artifacts, read from the local store without MLflow
    assert "(FINISHED; artifacts: graph.dot, graph.svg, operator.json, operator.py, weights.pt)" in done.stdout
    assert "HEAVY []" in done.stdout, done.stdout


def test_the_study_run_holds_the_verdict(searched) -> None:
    folder, result, _ = searched
    client = _client(folder)
    parent = client.get_run(result.parent_run_id)
    final = result.final
    assert final.verdict() in parent.data.tags["mlflow.note.content"]
    assert parent.data.tags[V.TAG_FINAL_HASH] == final.chosen.label
    stored = json.loads(Path(client.download_artifacts(result.parent_run_id, V.ARTIFACT_FINAL,
                                                       str(folder / "dl"))).read_text())
    assert stored == json.loads(json.dumps(result.study.user_attrs[V.FINAL]))


def test_baseline_runs_have_a_cost_ratio_and_artifacts(searched) -> None:
    folder, _, _ = searched
    client = _client(folder)
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
                              cwd=folder, env=_env(), stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == "", done.stderr
