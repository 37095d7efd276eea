"""The cheap screen of operators before their training (search/screen.py) and --screen in a real search."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import optuna
import pytest

from syno_automl import vocabulary as V
from syno_automl.cli import build_parser
from syno_automl.cli.options import config_of
from syno_automl.config import SearchConfig
from syno_automl.search.sampler import SynoSampler
from syno_automl.study import prepare, run_search
from syno_automl.study.screen import SCREENS, Screen

warnings.filterwarnings("ignore", message=".*does not have many workers.*")


@pytest.fixture(scope="module")
def context():
    # priors off: the screen must tell degenerate operators apart, and the priors keep those out of the space
    return prepare(SearchConfig(epochs=1, tracking_uri=None, heartbeat=None, priors=False))


@pytest.mark.parametrize("kind", SCREENS)
def test_the_score_is_deterministic_for_a_seed(context, kind):
    op = context.space.sample(1, seed=3)[0]
    first, again = Screen(context, kind, steps=4).score(op, seed=7), Screen(context, kind, steps=4).score(op, seed=7)
    assert first.score == again.score and first.losses == again.losses
    assert math.isfinite(first.score)


@pytest.fixture(scope="module")
def degenerate(context):
    """The sampled operator of least naswot score among 8: its activations collapse (bench/screen.py: about a third
    of the default space's operators do, none trains past val_acc 0.45)."""
    naswot = Screen(context, "naswot")
    return min(context.space.sample(8, seed=0), key=lambda op: naswot.score(op, seed=0).score)


@pytest.mark.parametrize("kind", SCREENS)
def test_the_original_layers_pass_and_outscore_a_degenerate_operator(context, degenerate, kind):
    screen = Screen(context, kind)
    worst = screen.score(degenerate, seed=0)
    good = screen.score(None, seed=11)   # the baseline model, another initialization than the reference's
    assert good.passed and not worst.passed
    assert good.score > worst.score
    if kind == "loss-slope":
        assert len(good.losses) == screen.steps and good.losses[-1] < good.losses[0]


def test_the_screen_refuses_unknown_kinds_and_too_few_steps(context):
    with pytest.raises(ValueError, match="screen must be one of"):
        Screen(context, "oracle")
    with pytest.raises(ValueError, match="needs >= 2 steps"):
        Screen(context, "loss-slope", steps=1)
    with pytest.raises(ValueError, match="--screen must be one of"):
        SearchConfig(screen="oracle").validate()
    with pytest.raises(ValueError, match="applies to --task image, not lm"):
        SearchConfig(task="lm", screen="naswot").validate()


def test_the_cli_sets_the_screen():
    args = build_parser().parse_args(["search", "--screen", "naswot", "--screen-threshold", "-12.5"])
    config = config_of(args)
    assert (config.screen, config.screen_threshold) == ("naswot", -12.5)
    assert config_of(build_parser().parse_args(["search"])).screen == "off"
    assert config.settings()["screen"] == "naswot"


# operators of at most 6 primitives, no whole-model timing before each trial (planned): not what is checked here
SMALL = dict(max_depth=6, speed_objective="planned")


def test_a_screened_trial_is_pruned_with_its_reason_before_training(tmp_path: Path):
    # threshold 1e9: log|K| of a batch of 64 is below 64 ln(units), so every operator is screened out
    config = SearchConfig(trials=2, epochs=1, storage=f"sqlite:///{tmp_path / 's.db'}", tracking_uri=None,
                          heartbeat=None, finalists=0, screen="naswot", screen_threshold=1e9, **SMALL)
    study = run_search(config, out=None).study
    baseline, *ops = study.trials
    assert baseline.state == optuna.trial.TrialState.COMPLETE and V.SCREEN_SCORE not in baseline.user_attrs
    assert len(ops) == 2
    sampler = study.sampler
    assert isinstance(sampler, SynoSampler)
    for t in ops:
        assert t.state == optuna.trial.TrialState.PRUNED
        assert t.user_attrs[V.SCREENED].startswith("screen naswot: score")
        assert t.user_attrs[V.PRUNED] == t.user_attrs[V.SCREENED]
        assert t.user_attrs[V.SCREEN_SCORE] is None or t.user_attrs[V.SCREEN_SCORE] < 1e9
        assert not t.intermediate_values                          # no epoch was trained
        assert V.COST_RATIO in t.user_attrs                       # its cost is known all the same
        assert sampler._reward_of(study, t) == sampler.reward.pruned   # the MCTS rewards it as any pruned trial


def test_an_operator_that_passes_the_screen_is_trained(tmp_path: Path):
    config = SearchConfig(trials=1, epochs=1, storage=f"sqlite:///{tmp_path / 's.db'}", tracking_uri=None,
                          heartbeat=None, finalists=0, screen="naswot", screen_threshold=-1e9, **SMALL)
    study = run_search(config, out=None).study
    op = study.trials[1]
    assert op.state == optuna.trial.TrialState.COMPLETE and V.SCREENED not in op.user_attrs
    assert math.isfinite(op.user_attrs[V.SCREEN_SCORE])
