"""The settings table (syno_automl/settings.py) is the one place a search setting is declared: the CLI's flags,
SearchConfig's fields, the stored settings, the resume rules and docs/search.md's section must match it, both ways."""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from syno_automl import config as C
from syno_automl.cli import build_parser
from syno_automl.cli.options import config_of, dest_of, fill_from_recorded
from syno_automl.errors import SynoError
from syno_automl.settings import (
    SETTING,
    SETTINGS,
    SettingChoiceError,
    SettingError,
    SettingRangeError,
    SettingTaskError,
    SettingTypeError,
    settings_markdown,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "search.md"
# flags of `search` that are not settings: how to run, not what is searched
NOT_SETTINGS = {"-h", "--help", "--debug", "--resume", "-q", "--quiet", "-v", "--verbose"}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _flags(name: str) -> set[str]:
    return {o for a in _subparser(name)._actions for o in a.option_strings}


def test_every_setting_with_a_flag_is_on_the_cli_and_every_cli_flag_is_a_setting():
    for command in ("search", "enumerate", "reevaluate", "show", "export", "report", "tune"):
        declared = {s.flag for s in SETTINGS if s.flag and command in s.commands}
        assert declared <= _flags(command), (command, declared - _flags(command))
    search_flags = _flags("search") - NOT_SETTINGS
    assert search_flags == {s.flag for s in SETTINGS if s.flag and "search" in s.commands}


def test_searchconfig_fields_are_the_table():
    """SearchConfig's fields are written out (editors and type checkers see them), each carrying its table entry: the
    table decides their order, annotation and default."""
    fields = dataclasses.fields(C.SearchConfig)
    assert [f.name for f in fields] == [s.name for s in SETTINGS]
    for f in fields:
        assert f.metadata["setting"] is SETTING[f.name], f.name
        assert f.type == C.field_type(SETTING[f.name]), f"{f.name}: write it as {C.field_type(SETTING[f.name])}"
    config = C.SearchConfig()
    for s in SETTINGS:
        assert getattr(config, s.name) == s.default_for("image"), s.name
    lm = C.SearchConfig(task="lm")
    assert (lm.model, lm.dataset, lm.layer, lm.where) == ("gpt", "text", "linear", "*.qkv")


def test_stored_settings_and_resume_rules_come_from_the_table():
    for task in ("image", "lm"):
        stored = C.SearchConfig(task=task).settings()
        assert set(stored) == {s.name for s in SETTINGS if s.recorded and task in s.tasks}
    assert C.RESUMABLE == {s.name for s in SETTINGS if s.resumable}
    assert set(C.LEGACY_SETTINGS) == {s.name for s in SETTINGS if s.has_legacy}
    assert not {s.name for s in SETTINGS if s.resumable and not s.recorded}, "a resumable setting is recorded"


def test_docs_section_is_the_generated_table():
    text = DOCS.read_text()
    found = re.search(r"<!-- settings:begin[^\n]*-->\n(.*?)<!-- settings:end -->", text, re.S)
    assert found, "docs/search.md has no settings section"
    assert found.group(1) == settings_markdown(), "run: python -m syno_automl.settings, paste into docs/search.md"
    for s in SETTINGS:
        assert f"| `{s.name}` |" in found.group(1)


def test_cli_values_reach_the_config_with_off_values():
    args = _subparser("search").parse_args(["--timeout", "0", "--cost-ratio", "0", "--latency", "llvm, torch",
                                            "--latency-margin", "-1", "--heartbeat", "0", "--flops-ratio", "0.25"])
    config = config_of(args)
    assert config.trial_timeout is None and config.cost_ratio is None and config.latency_margin is None
    assert config.heartbeat is None and config.latency_targets == ("llvm", "torch") and config.flops_ratio == 0.25
    assert config_of(_subparser("search").parse_args([])) == C.SearchConfig()
    for word in ("none", "OFF", ""):  # the one rule for a text setting's off words (cli_common.tracking_of reads it)
        assert config_of(_subparser("search").parse_args(["--tracking-uri", word])).tracking_uri is None
    assert config_of(_subparser("search").parse_args(["--flops-bins", "4"])).flops_bins == 4


def test_a_flag_of_another_task_is_refused():
    with pytest.raises(SettingTaskError, match="--steps"):
        config_of(_subparser("search").parse_args(["--steps", "5"]))
    with pytest.raises(SettingTaskError, match="--epochs"):
        config_of(_subparser("search").parse_args(["--task", "lm", "--epochs", "5"]))
    with pytest.raises(SettingTaskError):
        C.SearchConfig(task="lm", final_epochs=4).validate()


def test_resume_fills_what_was_not_given_from_the_recorded_settings():
    recorded = C.SearchConfig(trials=2, epochs=1, trial_timeout=None, final_margin=0.02).settings()
    args = _subparser("search").parse_args(["--resume", "--final-seeds", "5"])
    fill_from_recorded(args, recorded)
    config = config_of(args)
    assert (config.trials, config.epochs, config.trial_timeout, config.final_margin) == (2, 1, None, 0.02)
    assert config.final_seeds == 5
    assert all(getattr(args, dest_of(s)) is not None for s in SETTINGS
               if s.flag and s.recorded and "search" in s.commands and s.name in recorded
               and recorded[s.name] is not None)


@pytest.mark.parametrize("field, value, error", [
    ("lr", -1.0, SettingRangeError), ("trial_timeout", -5.0, SettingRangeError), ("max_depth", 0, SettingRangeError),
    ("image_size", -3, SettingRangeError), ("heartbeat", -5, SettingRangeError), ("final_margin", -0.1,
                                                                                   SettingRangeError),
    ("flops_ratio", float("nan"), SettingRangeError), ("epochs", "3", SettingTypeError), ("seed", True,
                                                                                            SettingTypeError),
    ("pruner", "median", SettingChoiceError), ("tokenizer", "words", SettingError), ("trials", -1, SettingRangeError),
])
def test_nonsense_values_are_refused_naming_the_flag(field, value, error):
    with pytest.raises(error) as caught:
        C.SearchConfig(**{field: value}).validate()
    assert isinstance(caught.value, SynoError) and isinstance(caught.value, ValueError)
    assert (SETTING[field].flag or field) in str(caught.value)


def test_an_echoed_value_is_cut():
    with pytest.raises(SettingError) as caught:
        C.SearchConfig(pruner="x" * 100_000).validate()
    assert len(str(caught.value)) < 300 and "100002 characters" in str(caught.value)
