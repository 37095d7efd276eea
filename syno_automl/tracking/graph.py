"""An operator's graph as SVG (the graph.svg artifact), drawn by Graphviz when it is installed.

Without Graphviz the search still runs; the user hears it once per process, in one short line (the
``syno_automl`` logger), not a two-line ``RuntimeWarning`` naming the venv's path for every trial.

Example:
    >>> svg = render_svg("digraph { a -> b }")   # doctest: +SKIP
"""
from __future__ import annotations

import logging

__all__ = ["render_svg"]

log = logging.getLogger("syno_automl")
_said: set[str] = set()  # the reasons already told in this process


def _skip(reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        log.warning("%s: graph.svg files are skipped (graph.dot is kept)", reason)


def render_svg(dot_text: str) -> str | None:
    """SVG text of a DOT graph, drawn by ``graphviz.Source(...).pipe``; None when the graphviz package or
    Graphviz's ``dot`` binary is missing, or ``dot`` rejects the graph (said once per reason and process)."""
    try:
        import graphviz
    except ImportError:
        _skip("the graphviz Python package is not installed (pip install graphviz)")
        return None
    try:
        return graphviz.Source(dot_text).pipe(format="svg", encoding="utf-8", quiet=True)
    except graphviz.ExecutableNotFound:
        _skip("Graphviz's `dot` is not installed (apt-get install graphviz)")
    except graphviz.CalledProcessError as e:
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr or e)
        first = (stderr.strip().splitlines() or ["no message"])[0][:120]
        _skip(f"Graphviz's `dot` failed ({first})")
    return None
