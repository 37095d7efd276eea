"""The study wing: running a search as an Optuna study. The shared context (context), opening or resuming the
study (opening, storage), one trial (trial, training, screen), the final stage and its verdict (finalists,
verdict), and the whole run (run).

The public names load on first use: a reading command that only opens the storage (``syno-automl show``) does not
pay for torch and Lightning, which the context and the run import.

Example:
    >>> from syno_automl.config import SearchConfig
    >>> from syno_automl.study import run_search
    >>> result = run_search(SearchConfig(trials=3, epochs=1))   # doctest: +SKIP
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from syno_automl import lazy_attributes

if TYPE_CHECKING:
    from syno_automl.study.context import SearchContext, prepare
    from syno_automl.study.run import SearchResult, run_search

__all__ = ["run_search", "SearchResult", "SearchContext", "prepare"]
_HOME = {"SearchContext": "context", "prepare": "context", "SearchResult": "run", "run_search": "run"}
__getattr__ = lazy_attributes(__name__, _HOME)
