"""Models whose 3x3 convolutions are all grouped (ResNeXt-29, in the --model list): the search substitutes them
with --groups, and without it says so in its own words (the flag, not substitute()'s groups=True)."""
from __future__ import annotations

import dataclasses

import pytest
from torch import nn

from syno_automl.cli import build_parser
from syno_automl.cli.options import config_of
from syno_automl.errors import SubstitutionError
from syno_automl.settings import SettingError
from syno_automl.study import prepare


def _config(*flags: str):
    args = build_parser().parse_args(["search", "--model", "resnext29_2x64d", "--tracking-uri", "none", *flags])
    return config_of(args)


def test_a_model_of_grouped_convs_needs_groups_and_says_so():
    # known from the model's name, before torch is imported (settings.GROUPED_MODELS): one short line
    with pytest.raises(SettingError, match=r"^--model resnext29_2x64d: .*grouped.*pass --groups"):
        _config().validate()
    # a layer glob of its own reaches substitute(), which says it in the search's words too
    with pytest.raises(SubstitutionError, match=r"^no layer can be substituted without --groups .*groups=2"):
        prepare(dataclasses.replace(_config(), where="layer*"))


def test_with_groups_the_grouped_convs_are_substituted_and_the_grouped_conv_is_in_the_space():
    config = _config("--groups")
    assert config.groups is True and "groups" in config.settings()
    context = prepare(config)
    sub = context.substitution
    probe = context.build_model()  # the original model: which of its convs keep their shape and are grouped
    grouped = {name for name, m in probe.named_modules()
               if isinstance(m, nn.Conv2d) and m.groups == 2 and m.stride == (1, 1)}
    assert grouped and {name for name, _ in sub.placeholders} == grouped
    assert all(m["g"] == 2 for m in sub.mappings)
    assert context.space.sample(2, seed=0)
