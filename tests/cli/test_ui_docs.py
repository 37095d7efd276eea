"""The MLflow UI shows what docs/search.md says it shows (headless Chromium on a real `mlflow ui`).

A tiny real search (baseline + 1 operator trial, a final stage of that one finalist and the baseline, 1 seed of 1
epoch each) is served by `mlflow ui`; each page of the path the doc describes is rendered by headless Chromium
(`--dump-dom` after `--virtual-time-budget`, the UI being a JS app), and its text is checked against the doc: the
GenAI landing page, the experiment's GenAI view (no runs there), the Model training view's runs table, the address
the search prints (its runs table with the accuracy and speedup columns, trials and final-stage runs), a trial's run
page and Artifacts tab, the baseline's artifacts and the Compare page. A fresh browser profile per page, as a first
visit (only the HTTP cache of the UI's scripts is shared). SYNO_UI_SHOTS=DIR also saves screenshots there
(docs/mlflow-runs.png and docs/mlflow-trial.png come from it); the printed address's page is always shot (into the
test's folder without it) and the PNG checked.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from html import unescape
from pathlib import Path

import pytest
from _cli_helpers import cli_here

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get "
                                                          "install chromium; scripts/install.sh does it as root)")]
DOC = (Path(__file__).resolve().parents[2] / "docs" / "search.md").read_text()
ML = "workflowType=machine_learning"   # what the Model training switch puts in the URL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui")
    env = dict(os.environ)
    # the cheapest final stage that logs final-stage runs: the one operator (the opening's grouped conv, planned
    # cost 0.59: a finalist by the planned speed objective, so that no timing decides it) and the baseline, 1 seed of
    # 1 epoch, a 100 pp margin (nothing left out as far behind), timed on cpu.eager (on any machine: the column's
    # name) in this process; in this process: no imports
    searched = cli_here(folder, "search", "--trials", "1", "--epochs", "1", "--speed-objective", "planned",
                        "--finalists", "1", "--final-seeds", "1", "--final-epochs", "1", "--final-margin", "1",
                        "--target", "cpu.eager", "--speed-process", "same")
    hint = next(line for line in searched.stdout.splitlines() if line.startswith("MLflow: "))
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("syno-automl")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    port = _free_port()
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"   # no background job workers: nothing here needs them
    log = open(folder / "mlflow-ui.log", "w")
    # its own session: uvicorn workers and MLflow's job runner are stopped with it, as one process group; one worker
    # (not uvicorn's 4, each importing MLflow's server): one browser at a time asks it
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", "sqlite:///mlflow.db",
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], cwd=folder, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (folder / "mlflow-ui.log").read_text()
            time.sleep(1)
        yield {"base": base, "folder": folder, "exp": experiment.experiment_id, "runs": runs, "client": client,
               "hint": hint}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:   # whatever of the group outlived the server (its uvicorn workers)
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()
        log.close()


def _chromium(args: list[str], tmp: Path, url: str, height: int = 1000) -> subprocess.CompletedProcess:
    """A fresh profile (none of the UI's saved state: a first visit), whose HTTP cache is the module's: the UI's
    ~20 MB of scripts are served once, not once per page (each cost the server ~0.7 s of CPU)."""
    profile = tmp / f"profile-{time.monotonic_ns()}"
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", f"--user-data-dir={profile}", f"--disk-cache-dir={tmp / 'cache'}",
                           f"--window-size=1600,{height}",
                           "--virtual-time-budget=20000", *args, url], capture_output=True, text=True, timeout=180)


def page_text(ui: dict, path: str, *expected: str, shot: str | None = None, height: int = 1000,
              always: bool = False) -> str:
    """The rendered text of the UI page `path` once it shows every `expected` string (3 tries: a loaded machine
    can leave the app still fetching when the virtual time runs out); `shot`: its screenshot, into SYNO_UI_SHOTS
    (`always`: into the test's folder without it; ui["shot"] is its path)."""
    url = ui["base"] + "/" + path
    for _ in range(3):
        dom = _chromium(["--dump-dom"], ui["folder"], url).stdout
        text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
        text = unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))
        if all(e in text for e in expected):
            break
    ui["dom"] = dom   # the page's last DOM, for what its text does not show (a plot's axis titles)
    shots = os.environ.get("SYNO_UI_SHOTS") or (ui["folder"] / "shots" if always else None)
    if shot and shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        ui["shot"] = Path(shots) / shot
        _chromium([f"--screenshot={ui['shot']}"], ui["folder"], url, height)
    return text


def test_landing_page_is_genai_and_lists_the_experiment(ui):
    text = page_text(ui, "#/", "Welcome to MLflow", "syno-automl")
    assert "GenAI" in text and "Model training" in text and "Experiments" in text, text[:2000]
    assert "GenAI" in DOC and "**Model training**" in DOC and "**Experiments**" in DOC


def test_the_genai_view_of_the_experiment_has_no_runs(ui):
    """What a click on the experiment shows in the default GenAI view: traces, and none of the runs."""
    text = page_text(ui, f"#/experiments/{ui['exp']}", "Traces", "Overview")
    assert "study-syno" not in text and "trial-0-baseline" not in text, text[:2000]


def test_runs_table_in_the_model_training_view(ui):
    exp = ui["exp"]
    text = page_text(ui, f"#/experiments/{exp}/runs?{ML}", "study-syno", "matching runs")
    assert "Runs" in text and "Columns" in text, text[:2000]
    assert "trial-0-baseline" not in text   # nested under the study run until expanded
    # the doc's filter lists the trials flat, sorted by val_acc (best first)
    query = ("searchFilter=attributes.run_name%20LIKE%20%27trial-%25%27&orderByKey=metrics.%60val_acc%60"
             "&orderByAsc=false")
    trials = sorted((r for n, r in ui["runs"].items() if n.startswith("trial-")),
                    key=lambda r: -r.data.metrics["val_acc"])
    names = [r.info.run_name for r in trials]
    text = page_text(ui, f"#/experiments/{exp}/runs?{ML}&{query}", *names)
    assert "Sort: val_acc" in text and "study-syno" not in text, text[:2000]
    assert [text.index(n) for n in names] == sorted(text.index(n) for n in names)
    assert "attributes.run_name LIKE 'trial-%'" in DOC and "Columns" in DOC


def test_trial_page_has_the_documented_metrics_params_and_artifacts(ui):
    name, run = next((n, r) for n, r in ui["runs"].items() if n.startswith("trial-") and "baseline" not in n)
    path = f"#/experiments/{ui['exp']}/runs/{run.info.run_id}"
    text = page_text(ui, f"{path}?{ML}", name, "Metrics", "Parameters", shot="mlflow-trial.png",
                     height=1900)
    for metric in ("val_acc", "flops_ratio", "num_params", "train_loss"):
        assert f"{metric} " in text and f"`{metric}`" in DOC, metric
    params = sorted(run.data.params)
    assert params == ["search.dataset", "search.model", "search.task"]
    assert {"syno.hash", "syno.depth", "syno.primitives"} <= set(run.data.tags)
    assert "`syno.primitives` under *Tags*" in DOC
    assert f"Parameters ({len(params)})" in text and all(p in text for p in params), text[:3000]
    assert "Parent run study-syno" in text and "`study-<name>`" in DOC
    files = ["operator.json", "operator.py", "graph.dot", "graph.svg", "weights.pt"]
    text = page_text(ui, f"{path}/artifacts?{ML}", *files)
    assert all(f in text for f in files), text[:2000]
    assert all(f"`{f}`" in DOC for f in files)


def test_baseline_and_study_runs(ui):
    base = ui["runs"]["trial-0-baseline"]
    text = page_text(ui, f"#/experiments/{ui['exp']}/runs/{base.info.run_id}/artifacts?{ML}", "layers.json")
    assert "layers.json" in text and "`layers.json`" in DOC
    study = ui["runs"]["study-syno"]
    settings = [k for k in study.data.params if k.startswith("search.")]
    assert len(settings) == len(study.data.params) > 10
    text = page_text(ui, f"#/experiments/{ui['exp']}/runs/{study.info.run_id}?{ML}", "Parameters")
    assert f"Parameters ({len(settings)})" in text, text[:3000]


def test_compare_page_plots_the_trade_off(ui):
    ids = [r.info.run_id for n, r in ui["runs"].items() if n.startswith("trial-")]
    runs = ",".join(f'"{i}"' for i in ids)
    text = page_text(ui, f'#/compare-runs?runs=[{runs}]&experiments=["{ui["exp"]}"]', "Parallel Coordinates Plot")
    assert f"Comparing {len(ids)} Runs" in text and "Scatter Plot" in text, text[:2000]
    assert "flops_ratio" in text and "val_acc" in text
    assert "**Compare**" in DOC and "parallel-coordinates" in DOC
    # the parallel-coordinates plot opens on the params that differ (none: the trials share the study's) and the
    # first metric, the accuracy; never on the operator's depth, which a baseline lacks (it did, a constant axis)
    axes = re.findall(r'class="axis-title"[^>]*data-unformatted="([^"]*)"', ui["dom"])
    assert "val_acc" in axes and not {"syno.hash", "syno.depth", "syno.primitives"} & set(axes), axes
    assert "opens on the numeric parameters that" in DOC


def test_the_printed_address_opens_the_runs_table_with_accuracy_and_speedup(ui):
    """The search's last MLflow line: the command serving the store from its folder, and the address of the study's
    runs table (a saved view the search wrote on the experiment): its trials and final-stage runs, listed flat, the
    trials best first, with the accuracy, final accuracy, speedup and cost columns; its screenshot a PNG of the
    window's size that is not blank."""
    from PIL import Image, ImageStat

    hint = ui["hint"]
    assert hint.startswith(f"MLflow: cd {ui['folder']} && mlflow ui --backend-store-uri sqlite:///mlflow.db "), hint
    address = hint.rsplit("then open ", 1)[1]
    assert address.startswith("http://127.0.0.1:5000/#/experiments/") and "viewStateShareKey=syno-syno" in address
    assert "compareRunsMode" not in address   # the table, not the charts
    trials = sorted((r for n, r in ui["runs"].items() if n.startswith("trial-")),
                    key=lambda r: -r.data.metrics["val_acc"])
    operator = next(r.data.tags["syno.hash"] for r in trials if r.info.run_name != "trial-0-baseline")
    finals = sorted(n for n in ui["runs"] if n.startswith("final-"))
    assert finals == sorted(["final-baseline", f"final-{operator}"]), finals
    names = [r.info.run_name for r in trials] + finals
    columns = ["val_acc", "final_val_acc", "speedup.cpu.eager", "cost_ratio"]
    text = page_text(ui, address.split("5000/", 1)[1], *names, *columns, shot="mlflow-runs.png", height=560,
                     always=True)
    assert all(n in text for n in names) and "study-syno" not in text, text[:2000]
    assert f"{len(names)} matching runs" in text and "Sort: val_acc" in text, text[:2000]
    # the columns in the view's order (their header cells' column index), the trials best first, then the final runs
    at = {c: int(i) for i, c in re.findall(r'role="columnheader"[^>]*aria-colindex="(\d+)" col-id="metrics\.`([^`]+)`"',
                                           ui["dom"])}
    assert [c for c in sorted(at, key=at.get) if c in columns] == columns, at
    order = [text.index(n) for n in names]
    assert order[:len(trials)] == sorted(order[:len(trials)]) and max(order[:len(trials)]) < min(order[len(trials):])
    with Image.open(ui["shot"]) as shot:
        assert shot.format == "PNG" and shot.size == (1600, 560), (shot.format, shot.size)
        grey = shot.convert("L")
        assert ImageStat.Stat(grey).stddev[0] > 20 and len(grey.getcolors(1 << 16) or []) > 50   # text drawn
    assert "cd <the search's folder> && mlflow ui" in DOC and "viewStateShareKey=syno-<study>" in DOC
    assert "final_val_acc" in DOC and "mlflow.sharedViewState.syno-<study>" in DOC


def test_the_description_shows_an_escaped_verdict_as_written(ui):
    from syno_automl.tracking.ui import escape_markdown

    verdict = "fastest operator: SPLIT H -> [s^-1*H, s] → MERGE s^-1*C_in * C_out (a|b ~x~ `y` <z> & #1)"
    study = ui["runs"]["study-syno"]
    ui["client"].set_tag(study.info.run_id, "mlflow.note.content", f"**{escape_markdown(verdict)}**\n\nmore")
    text = page_text(ui, f"#/experiments/{ui['exp']}/runs/{study.info.run_id}?{ML}", "Description", "more")
    assert verdict in text, text[:2000]
    assert f"<strong>{verdict.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</strong>" \
        in ui["dom"], ui["dom"][:3000]
