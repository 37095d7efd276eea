"""The embedded datasets' default models (syno_automl.settings): digits -> pointwise_cnn, mnist1d -> pointwise_cnn1d
and Conv1d; small_cnn stays available by name and a study made with it resumes to it; the default search
substitutes the convs after the stem."""
from __future__ import annotations

import argparse

import pytest

from syno_automl.cli import build_parser
from syno_automl.cli.options import config_of, fill_from_recorded
from syno_automl.config import SearchConfig, settings_diff
from syno_automl.settings import SETTING, SettingError


def _search_args(argv: list[str]) -> argparse.Namespace:
    """`syno-automl search ARGV` as the command line parses it."""
    return build_parser().parse_args(["search", *argv])


@pytest.mark.parametrize("given, expected", [
    ({}, ("pointwise_cnn", "digits", "conv2d")),
    ({"dataset": "mnist1d"}, ("pointwise_cnn1d", "mnist1d", "conv1d")),
    ({"model": "small_cnn"}, ("small_cnn", "digits", "conv2d")),
    ({"dataset": "mnist1d", "model": "small_cnn1d"}, ("small_cnn1d", "mnist1d", "conv1d")),
    ({"task": "lm"}, ("gpt", "text", "linear")),
])
def test_the_default_model_and_layer_follow_the_dataset(given: dict, expected: tuple) -> None:
    config = SearchConfig(**given)
    config.validate()
    assert (config.model, config.dataset, config.layer) == expected
    assert config_of(_search_args([f"--{k}={v}" for k, v in given.items()])) == config


def test_the_help_names_the_per_dataset_defaults() -> None:
    assert SETTING["model"].default_text() == "pointwise_cnn (mnist1d: pointwise_cnn1d); lm: gpt"
    assert SETTING["layer"].default_text() == "conv2d (mnist1d: conv1d); lm: linear"


@pytest.mark.parametrize("given, words", [
    ({"dataset": "mnist1d", "model": "small_cnn"}, ("--dataset mnist1d", "small_cnn is an image model",
                                                    "pointwise_cnn1d")),
    ({"model": "pointwise_cnn1d"}, ("--model pointwise_cnn1d reads 1-D sequences", "--dataset digits")),
    ({"dataset": "mnist1d", "image_size": 16}, ("--image-size", "mnist1d")),
])
def test_a_model_or_size_of_the_other_dimension_is_refused(given: dict, words: tuple) -> None:
    with pytest.raises(SettingError) as caught:
        SearchConfig(**given).validate()
    assert all(w in str(caught.value) for w in words), str(caught.value)


@pytest.mark.parametrize("recorded_config", [SearchConfig(model="small_cnn"), SearchConfig(),
                                             SearchConfig(dataset="mnist1d")])
def test_a_resume_builds_the_recorded_model(recorded_config: SearchConfig) -> None:
    """A study made with small_cnn (the default before pointwise_cnn) resumes to small_cnn, not to the new default."""
    recorded = recorded_config.settings()
    args = _search_args(["--resume"])
    fill_from_recorded(args, recorded)
    config = config_of(args)
    assert (config.model, config.layer) == (recorded_config.model, recorded_config.layer)
    assert settings_diff(recorded, config.settings()) == {}


def test_the_default_search_substitutes_the_two_convs_after_the_stem() -> None:
    from syno_automl.study.context import prepare

    context = prepare(SearchConfig(epochs=1, tracking_uri=None))
    assert context.config.model == "pointwise_cnn"
    assert [name for name, _ in context.substitution.placeholders] == ["features.1.0", "features.3.0"]
    assert [name for name, _ in context.substitution.skipped] == ["features.0.0"]   # the 1x1 stem


def test_the_mnist1d_search_substitutes_the_three_conv1d_after_the_stem(monkeypatch, tmp_path) -> None:
    from syno_automl.study.context import prepare

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))   # the generated data lands here, not in ~/.cache
    context = prepare(SearchConfig(dataset="mnist1d", epochs=1, tracking_uri=None))
    assert (context.config.model, context.substitution.kind) == ("pointwise_cnn1d", "conv1d")
    assert tuple(context.example.shape) == (64, 1, 40)
    assert [name for name, _ in context.substitution.placeholders] == ["features.1.0", "features.2.0", "features.3.0"]
    assert [name for name, _ in context.substitution.skipped] == ["features.0.0"]   # the 1-tap stem


@pytest.mark.parametrize("given, expected", [
    ({}, 1.0),                                        # the task's default
    ({"dataset": "mnist1d"}, 2.0),                    # the dataset's: a 3-tap Conv1d's plan is mostly its writes
    ({"dataset": "mnist1d", "cost_ratio": 1.0}, 1.0),  # given: kept, even where it equals another default
    ({"dataset": "mnist1d", "cost_ratio": 0}, None),  # 0: no budget, not the dataset's default
    ({"cost_ratio": 0.0}, None),
])
def test_the_cost_budget_defaults_per_dataset_and_zero_turns_it_off(given, expected):
    from syno_automl.config import SearchConfig

    assert SearchConfig(**given).cost_ratio == expected


def test_a_budget_turned_off_survives_the_command_line_and_a_resume():
    from syno_automl.cli.app import build_parser
    from syno_automl.cli.options import config_of
    from syno_automl.settings import SETTING

    args = build_parser().parse_args(["search", "--dataset", "mnist1d", "--cost-ratio", "0"])
    config = config_of(args)
    assert config.cost_ratio is None
    recorded = config.settings()["cost_ratio"]   # what the study keeps, and what --resume gives back
    again = config_of(build_parser().parse_args(["search", "--dataset", "mnist1d", "--cost-ratio",
                                                 str(SETTING["cost_ratio"].to_cli(recorded))]))
    assert again.cost_ratio is None
