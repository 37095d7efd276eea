"""What MLflow shows of a search (issue 34, item 6; issue 46, item 6): the study run's description renders the verdict
as written, an operator run lists its primitives in `show`'s order and as tags (Compare's default axes are the params
that differ: no string among them), and the search's last MLflow line serves the store from its folder and names the
address of the study's runs table (a saved view: its columns). tests/cli/test_ui_docs.py checks the same in a real
`mlflow ui` with headless Chromium."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from syno_automl.tracking.ui import RunsView, escape_markdown, runs_url, ui_hint

VERDICT = ("fastest operator within 1 pp of the baseline: 5dd8 new: SPLIT H -> [s^-1*H, s] → REDUCE s^-1*C_in "
           "accuracy 0.975 ± 0.004, speedup 1.42× [1.37, 1.45] (cpu.eager: a|b ~x~ `y` <z> & #1 !w \\)")


def _commonmark_text(markdown: str) -> str:
    """What a CommonMark renderer shows of a line that has no markup left: backslash escapes and entities undone."""
    text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)
    return text.replace("&lt;", "<").replace("&amp;", "&")


def test_the_verdict_is_escaped_to_render_as_written() -> None:
    escaped = escape_markdown(VERDICT)
    assert _commonmark_text(escaped) == VERDICT
    # no emphasis, code span, link, strikethrough, table cell or HTML can start: every such character is escaped
    assert not re.search(r"(?<!\\)[*_`\[\]~|]|<", escaped.replace("\\\\", "")), escaped
    assert "s^-1\\*H" in escaped and "C\\_in" in escaped   # the issue's `s^-1*H` became italic `s^-1H`


def test_runs_url_opens_the_studys_runs_best_first() -> None:
    """Shared: by the view's key alone (facets beside it would make MLflow ignore the view); not shared: the facets
    in the URL, the study's runs but its own, best first."""
    view = RunsView("syno", "val_acc", maximize=True, speed_target="cpu.eager")
    url = runs_url("http://127.0.0.1:5000", "7", view, shared=True)
    parts = urlsplit(url)
    assert parts.fragment.startswith("/experiments/7/runs?")
    assert parse_qs(parts.fragment.split("?", 1)[1]) == {"workflowType": ["machine_learning"],
                                                         "viewStateShareKey": ["syno-syno"]}
    query = parse_qs(urlsplit(runs_url("http://127.0.0.1:5000", "7", view)).fragment.split("?", 1)[1])
    assert query["searchFilter"] == ["tags.`syno.study` = 'syno' and tags.`syno.role` != 'study'"]
    assert query["orderByKey"] == ["metrics.`val_acc`"] and query["orderByAsc"] == ["false"]
    lm = parse_qs(urlsplit(runs_url("http://h:1", "7", RunsView("lm", "val_loss", maximize=False)))
                  .fragment.split("?", 1)[1])
    assert lm["orderByKey"] == ["metrics.`val_loss`"] and lm["orderByAsc"] == ["true"]


@pytest.mark.parametrize("study, key", [
    ("syno", "syno-syno"),
    ("my.study_2-b", "syno-my.study_2-b"),
    ("a b/c'd", "syno-a_b_c_d-" + hashlib.sha256(b"a b/c'd").hexdigest()[:10]),   # a digest keeps it apart
])
def test_the_views_key_is_the_studys_and_url_safe(study: str, key: str) -> None:
    assert RunsView(study, "val_acc").key == key


def test_the_view_is_mlflows_saved_view_envelope() -> None:
    """The tag as MLflow 3.17's runs page reads it (mlflow/server/js: `mlflow.sharedViewState.<key>`, an envelope
    {name, createdAt, updatedAt, state} whose state is a JSON string of the facets and the UI state)."""
    key, value = RunsView("syno", "val_acc", speed_target="cpu.eager").tag(now_ms=1000)
    assert key == "mlflow.sharedViewState.syno-syno"
    envelope = json.loads(value)
    assert envelope["createdAt"] == envelope["updatedAt"] == 1000 and "syno" in envelope["name"]
    state = json.loads(envelope["state"])
    columns = ["metrics.`val_acc`", "metrics.`final_val_acc`", "metrics.`speedup.cpu.eager`", "metrics.`cost_ratio`"]
    assert state["selectedColumns"] == state["columnOrder"] == columns
    assert state["orderByKey"] == "metrics.`val_acc`" and state["orderByAsc"] is False
    assert state["runsHiddenMode"] == "SHOW_ALL" and state["columnWidths"]["metrics.`speedup.cpu.eager`"] > 150


def test_the_hint_serves_the_store_from_its_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    view = RunsView("syno", "val_acc")
    hint = ui_hint("sqlite:///mlflow.db", "1", view, shared=True)
    assert hint.startswith(f"MLflow: cd {tmp_path} && mlflow ui --backend-store-uri sqlite:///mlflow.db "
                           f"--host 127.0.0.1 --port 5000"), hint
    assert "in the search's folder" in hint and hint.endswith(runs_url("http://127.0.0.1:5000", "1", view, True))
    elsewhere = ui_hint(f"sqlite:///{tmp_path / 'sub dir' / 'm.db'}", None)
    assert elsewhere.startswith(f"MLflow: cd '{tmp_path / 'sub dir'}' && mlflow ui --backend-store-uri sqlite:///m.db")
    assert ui_hint("http://127.0.0.1:5005", "3", RunsView("s", "val_acc")) == \
        "MLflow: " + runs_url("http://127.0.0.1:5005", "3", RunsView("s", "val_acc"))


def test_an_operator_run_lists_its_primitives_as_show_does_and_as_tags(tmp_path: Path) -> None:
    from _syno_helpers import tiny_space

    from syno_automl.tracking import SearchTracker

    op = tiny_space().sample(1, seed=0)[0]
    shown = [line.strip() for line in str(op).splitlines()[1:] if not line.strip().startswith("input ")]
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = tracker.trial_run(tracker.study_run("s", {"model": "small_cnn"}), "s", 1, op)
    data = tracker.client.get_run(run.run_id).data
    assert data.tags["syno.primitives"].split(" | ") == shown      # `syno-automl show`'s order: forward
    assert data.tags["syno.hash"] == op.hash and data.tags["syno.depth"] == str(op.depth)
    assert sorted(data.params) == []   # Compare's default axes: no hash, no primitives, no depth (a baseline has none)
