"""The command line's side of the settings table (syno_automl.settings): the flags each subcommand takes, the
SearchConfig they make, and what a ``--resume`` fills in from the study's recorded settings.

A setting's flag is declared with ``default=None`` (its help says the table's default), so that a value left out
can be told from one given: a ``--resume`` takes the study's own, a new search the table's.

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser(); add_setting_flags(p, "search")
    >>> config_of(p.parse_args(["--flops-ratio", "0.25", "--timeout", "0"])).trial_timeout is None
    True
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from syno_automl.settings import (
    GROUPED_MODELS,
    MODEL_TASKS,
    REEVALUATE_DEFAULTS,
    SETTINGS,
    STORE_COMMANDS,
    TASKS,
    Setting,
    SettingTaskError,
    section_of,
)

__all__ = ["add_setting_flags", "config_of", "fill_from_recorded", "dest_of"]


def dest_of(s: Setting) -> str:
    """The argparse attribute of a setting's flag (``--timeout`` -> ``timeout``)."""
    return str(s.flag).lstrip("-").replace("-", "_")


def _help(s: Setting, command: str = "search") -> str:
    tasks = "" if len(s.tasks) > 1 else f"{s.tasks[0]}: "
    text = s.help
    default = s.default_text()
    if command == "reevaluate" and s.name in REEVALUATE_DEFAULTS:   # its own default, not a trial's
        text, default = text.replace(" per trial", " of each re-training"), str(REEVALUATE_DEFAULTS[s.name])
    if s.name == "model":   # the names (not argparse's choices: a wrong one is refused with the list, in one line)
        text += ": " + "; ".join(f"--task {task}: {', '.join(m for m, t in MODEL_TASKS.items() if t == task)}"
                                 for task in TASKS) + f" ({', '.join(GROUPED_MODELS)} with --groups)"
    return f"{tasks}{text} (default: {default})".replace("%", "%%")


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """Adds the flags of every setting `command` takes, in the table's order, grouped under the titles of the
    table's sections (settings.SECTIONS) in --help."""
    groups: dict[str, Any] = {}
    for s in SETTINGS:
        if s.flag is None or command not in s.commands:
            continue
        title = section_of(s)
        group = groups[title] if title in groups else groups.setdefault(title, parser.add_argument_group(title))
        # the store options have a real default: the reading commands use it without a SearchConfig
        default = s.default if command in STORE_COMMANDS and s.name in ("storage", "study", "tracking_uri") \
            else None
        if s.kind is bool:   # the flag turns a setting on (--latency-inductor), or off (--no-priors)
            group.add_argument(s.flag, action="store_const", const=not s.default, default=default,
                               help=_help(s, command))
            continue
        kind = s.parse or {int: int, float: float}.get(s.kind, str)
        group.add_argument(s.flag, type=kind, default=default, help=_help(s, command), metavar=s.metavar,
                            choices=s.choices if s.kind is str and s.choices and s.name != "model" else None)


def config_of(args: argparse.Namespace, **extra: Any) -> Any:
    """The SearchConfig of the parsed flags (the table's defaults for those not given), `extra` fields on top.
    A flag given for another task is refused (SettingTaskError)."""
    from syno_automl.config import SearchConfig

    task = getattr(args, "task", None) or "image"
    values: dict[str, Any] = {"task": task}
    given_elsewhere = []
    for s in SETTINGS:
        if s.flag is None or not hasattr(args, dest_of(s)) or s.name == "task":
            continue
        value = getattr(args, dest_of(s))
        if value is None:
            continue
        if task not in s.tasks:
            given_elsewhere.append(s)
            continue
        values[s.name] = s.from_cli(value)
    if given_elsewhere:
        flags = ", ".join(s.flag for s in given_elsewhere if s.flag)
        other = given_elsewhere[0].tasks[0]
        raise SettingTaskError(f"{flags} only appl{'ies' if len(given_elsewhere) == 1 else 'y'} to --task {other}")
    values.update(extra)
    return SearchConfig(**values)


def fill_from_recorded(args: argparse.Namespace, recorded: Mapping[str, Any]) -> None:
    """Flags not given on a --resume take the study's recorded settings (as the command line would give them)."""
    for s in SETTINGS:
        if s.flag is None or not s.recorded or not hasattr(args, dest_of(s)) or s.name not in recorded:
            continue
        if getattr(args, dest_of(s)) is None:
            setattr(args, dest_of(s), s.to_cli(recorded[s.name]))
