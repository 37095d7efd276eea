"""graph.svg rendered by Graphviz's `dot` (syno_automl.tracking.graph.render_svg): without `dot` it is skipped with
one short line per process, not a two-line warning naming the venv's path for every trial; a graph `dot` rejects is
skipped and said."""
from __future__ import annotations

import logging
import warnings

import pytest

from syno_automl.tracking import graph as graph_render
from syno_automl.tracking.graph import render_svg

DOT = "digraph { a -> b }"


def test_without_dot_the_skip_is_said_once_in_one_short_line(monkeypatch, caplog) -> None:
    monkeypatch.setattr(graph_render, "_said", set())
    monkeypatch.setenv("PATH", "/nonexistent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning (its two lines name the source file's path)
        with caplog.at_level(logging.WARNING, logger="syno_automl"):
            assert [render_svg(DOT) for _ in range(5)] == [None] * 5  # five trials
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 1, told
    assert "\n" not in told[0] and "/" not in told[0] and "apt-get install graphviz" in told[0]


def test_a_graph_dot_rejects_is_skipped_and_said(monkeypatch, caplog) -> None:
    pytest.importorskip("graphviz")
    monkeypatch.setattr(graph_render, "_said", set())
    if render_svg(DOT) is None:
        pytest.skip("Graphviz's dot is not installed here")
    assert render_svg(DOT).lstrip().startswith("<?xml")
    with caplog.at_level(logging.WARNING, logger="syno_automl"):
        assert render_svg("digraph { a -> }") is None
    assert len(caplog.records) == 1 and "`dot` failed (" in caplog.records[0].getMessage()
