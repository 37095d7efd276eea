"""The resolved run context (syno_automl.study.context): prepare validates the config once and resolves the task,
the device, the speed targets and the budgets once; downstream reads them."""
from __future__ import annotations

import pytest

from syno_automl.config import SearchConfig
from syno_automl.settings import SETTINGS, Setting
from syno_automl.study.context import Budgets, prepare
from syno_automl.tasks import ImageTask


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every setting checked while the test runs."""
    checked: list[str] = []
    original = Setting.validate

    def counting(self: Setting, value):  # noqa: ANN001, ANN202 -- the table's own signature
        checked.append(self.name)
        return original(self, value)

    monkeypatch.setattr(Setting, "validate", counting)
    return checked


def test_a_config_is_validated_once_per_entry_point(validations):
    config = SearchConfig(epochs=1, tracking_uri=None)
    config.validate()                   # the CLI, before the heavy imports
    context = prepare(config)           # run_search and prepare ask again: nothing changed, nothing re-checked
    assert len(validations) == len(SETTINGS)
    config.epochs = 2                   # reevaluate's change: checked again
    config.validate()
    assert len(validations) == 2 * len(SETTINGS)
    assert isinstance(context.task, ImageTask)


def test_a_bad_value_set_after_validation_is_still_refused():
    from syno_automl.settings import SettingRangeError

    config = SearchConfig()
    config.validate()
    config.flops_ratio = 0
    with pytest.raises(SettingRangeError, match="--flops-ratio"):
        config.validate()


def test_budgets_are_a_record_apart_from_the_space_options():
    context = prepare(SearchConfig(epochs=1, tracking_uri=None, flops_ratio=0.4, cost_ratio=0.9))
    assert context.budgets == Budgets(flops=0.4, cost=0.9)
    assert not {"flops_ratio", "cost_ratio"} & set(context.space_options)
    assert context.space.budgets["max_flops"] == pytest.approx(0.4 * context.substitution.baseline_flops)
