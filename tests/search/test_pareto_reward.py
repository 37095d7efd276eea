"""ParetoReward (syno_automl.search.pareto): accuracy credited only at a speedup over the replaced layers."""
from __future__ import annotations

import math

import optuna
import pytest
from _syno_helpers import tiny_space
from hypothesis import given
from hypothesis import strategies as st

from syno_automl.search.pareto import ParetoReward, speed_credit
from syno_automl.search.reward import Reward
from syno_automl.search.sampler import SynoSampler, suggest_operator

ACCURACY = ParetoReward(Reward(lower=0.1, upper=1.0, power=2.0), speedup=2.0)
LOSS = ParetoReward(Reward.for_loss(upper=5.5, power=2.0), speedup=2.0)

accuracies = st.floats(0.0, 1.0)
costs = st.floats(0.01, 3.0)


@pytest.mark.parametrize("values, expected", [
    ((0.95, 1.0), 0.0),          # the baseline's own cost: no credit, however accurate
    ((0.95, 1.7), 0.0),          # slower than the layers replaced
    ((0.05, 0.3), 0.0),          # below chance: no accuracy reward, however fast
    ((1.0, 0.5), 1.0),           # perfect at the full speedup
    ((1.0, 0.1), 1.0),           # beyond the speedup: no more credit
    ((1.0, 2 ** -0.5), 0.5),     # half the speedup in log scale: half the credit
    ((0.55, 0.5), 0.25),         # ((0.55 - 0.1) / 0.9) ** 2
])
def test_reward_table(values, expected):
    assert ACCURACY.value_of(values) == pytest.approx(expected)


@given(accuracies, accuracies, costs)
def test_more_accurate_at_the_same_cost_never_earns_less(a, b, cost):
    low, high = sorted((a, b))
    assert ACCURACY(high, cost) >= ACCURACY(low, cost)


@given(accuracies, costs, costs)
def test_cheaper_at_the_same_accuracy_never_earns_less(accuracy, c1, c2):
    cheap, dear = sorted((c1, c2))
    assert ACCURACY(accuracy, cheap) >= ACCURACY(accuracy, dear)


@given(st.floats(0.0, 5.5), st.floats(0.0, 5.5), costs)
def test_a_lower_loss_at_the_same_cost_never_earns_less(a, b, cost):
    low, high = sorted((a, b))
    assert LOSS(low, cost) >= LOSS(high, cost)


@given(st.floats(0.0, 0.9), st.floats(1.0, 3.0))
def test_worse_than_the_baseline_on_both_axes_earns_nothing(accuracy, cost):
    """The baseline at (0.9, 1.0): less accurate and no cheaper gets 0."""
    assert ACCURACY(accuracy, cost) == 0.0


@given(accuracies, costs)
def test_rewards_stay_in_the_unit_interval(accuracy, cost):
    assert 0.0 <= ACCURACY(accuracy, cost) <= 1.0


def test_missing_and_non_finite_values_get_the_failed_reward():
    reward = ParetoReward(Reward(failed=0.05, pruned=0.02))
    assert reward.value_of([0.9]) == 0.05 and reward(float("nan"), 0.5) == 0.05 and reward(0.9, None) == 0.05
    assert reward.pruned == 0.02 and speed_credit(math.inf, 2.0) == 0.0 and speed_credit(0.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="speedup"):
        ParetoReward(Reward(), speedup=1.0)
    with pytest.raises(TypeError):
        ParetoReward(0.5)  # type: ignore[arg-type]


def test_the_sampler_backpropagates_both_values_of_a_multi_objective_trial():
    """A 2-objective study: the tree's statistics are the ParetoReward of (accuracy, cost ratio)."""
    reward = ParetoReward(Reward(power=1.0), speedup=2.0)
    sampler = SynoSampler(tiny_space(), seed=0, reward=reward)
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(lambda trial: (0.8, 0.25 if suggest_operator(trial).depth % 2 else 0.9), n_trials=4)
    expected = sorted(reward.value_of(t.values) for t in study.trials)
    assert sorted(sampler._reward_of(study, t) for t in study.trials) == pytest.approx(expected)
    sampler._sync(study)  # the tree learns of the last trial at the next decision
    assert sampler._tree.stats(()).visits == 4
    assert sampler._tree.stats(()).mean == pytest.approx(sum(expected) / 4, abs=1e-6)
