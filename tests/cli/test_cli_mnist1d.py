"""`syno-automl search --dataset mnist1d` end to end: MNIST-1D generated into the user's cache (here a temp folder),
pointwise_cnn1d's three 3-tap Conv1d layers substituted, trials trained, a final stage and its verdict."""
from __future__ import annotations

from pathlib import Path

import pytest
from _cli_helpers import cli_here, read_study

from syno_automl import vocabulary as V


@pytest.mark.slow
def test_a_search_on_mnist1d_substitutes_the_conv1d_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))   # the generated data lands here, not in ~/.cache
    # the smallest final stage that still compares: 1 finalist, 1 seed of 1 epoch, a 100 pp margin; the dataset's
    # own planned-cost budget (2.0: at 1.0 random descents find next to no operator in these 3-tap Conv1d layers)
    # and its embedded threads (1); 2 operator trials
    done = cli_here(tmp_path, "search", "--dataset", "mnist1d", "--trials", "2", "--epochs", "1",
                    "--timeout", "0", "--finalists", "1", "--final-seeds", "1",
                    "--final-epochs", "1", "--final-margin", "1")
    assert "(pointwise_cnn1d on mnist1d, 3 layers substituted" in done.stdout, done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(("fastest operator within 100 pp of the baseline: ", "no operator within 100 pp")), last
    study = read_study(tmp_path)
    settings = study.user_attrs[V.SETTINGS]
    assert (settings["model"], settings["dataset"], settings["layer"]) == ("pointwise_cnn1d", "mnist1d", "conv1d")
    assert settings["cost_ratio"] == 2.0
    assert study.trials[1].user_attrs[V.SPEED]["conditions"]["threads"] == 1   # embedded: one torch thread
    assert len(study.trials) == 3 and all(t.state.is_finished() for t in study.trials)
    baseline = study.trials[0]
    assert baseline.user_attrs[V.BASELINE] and baseline.values[0] > 0.5   # chance is 0.1
    assert len(list((tmp_path / "cache" / "syno_automl" / "mnist1d").glob("mnist1d-*.npz"))) == 1
