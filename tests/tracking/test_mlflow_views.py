"""What MLflow shows of a search (issue 34, item 6): the study run's description renders the verdict as written, an
operator run lists its primitives in `show`'s order and as tags (Compare's default axes are the params that differ:
no string among them), and the search's last MLflow line serves the store from its folder and names the address of
the study's trials. tests/cli/test_ui_docs.py checks the same in a real `mlflow ui` with headless Chromium."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from syno_automl.tracking.ui import escape_markdown, runs_url, ui_hint

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


def test_runs_url_opens_the_studys_trials_best_first() -> None:
    url = runs_url("http://127.0.0.1:5000", "7", "syno", "val_acc", maximize=True)
    parts = urlsplit(url)
    assert parts.fragment.startswith("/experiments/7/runs?")
    query = parse_qs(parts.fragment.split("?", 1)[1])
    assert query["workflowType"] == ["machine_learning"] and query["compareRunsMode"] == ["CHART"]
    assert query["searchFilter"] == ["tags.`syno.study` = 'syno' and tags.`syno.role` = 'trial'"]
    assert query["orderByKey"] == ["metrics.`val_acc`"] and query["orderByAsc"] == ["false"]
    lm = parse_qs(urlsplit(runs_url("http://h:1", "7", "lm", "val_loss", maximize=False)).fragment.split("?", 1)[1])
    assert lm["orderByKey"] == ["metrics.`val_loss`"] and lm["orderByAsc"] == ["true"]


def test_the_hint_serves_the_store_from_its_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    hint = ui_hint("sqlite:///mlflow.db", "1", "syno", "val_acc")
    assert hint.startswith(f"MLflow: cd {tmp_path} && mlflow ui --backend-store-uri sqlite:///mlflow.db "
                           f"--host 127.0.0.1 --port 5000"), hint
    assert "in the search's folder" in hint and hint.endswith(runs_url("http://127.0.0.1:5000", "1", "syno",
                                                                       "val_acc"))
    elsewhere = ui_hint(f"sqlite:///{tmp_path / 'sub dir' / 'm.db'}", None)
    assert elsewhere.startswith(f"MLflow: cd '{tmp_path / 'sub dir'}' && mlflow ui --backend-store-uri sqlite:///m.db")
    assert ui_hint("http://127.0.0.1:5005", "3", "s", "val_acc") == \
        "MLflow: " + runs_url("http://127.0.0.1:5005", "3", "s", "val_acc")


def test_an_operator_run_lists_its_primitives_as_show_does_and_as_tags(tmp_path: Path) -> None:
    from _syno_helpers import tiny_space

    from syno_automl.tracking import SearchTracker

    op = tiny_space().sample(1, seed=0)[0]
    shown = [line.strip() for line in str(op).splitlines()[1:] if not line.strip().startswith("input ")]
    tracker = SearchTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = tracker.trial_run(tracker.study_run("s", {"model": "small_cnn"}), "s", 1, op)
    data = tracker.client.get_run(run.run_id).data
    assert data.tags["syno.primitives"].split(" | ") == shown      # `syno-automl show`'s order: forward
    assert data.tags["syno.hash"] == op.hash
    assert sorted(data.params) == ["syno.depth"]   # Compare's default axes: no hash, no primitives
