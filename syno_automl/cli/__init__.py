"""``syno-automl``, the command line: the parser and entry point (app), the settings table's flags (options), the
commands (search: search, show, export; report; measure: enumerate, reevaluate, tune, calibrate), what they share
(common, text) and how they find a study's trials and runs (lookup)."""
from __future__ import annotations

from syno_automl.cli.app import build_parser, main

__all__ = ["main", "build_parser"]
