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


@pytest.mark.parametrize("seed", [0, 7, -3, (1 << 32) + 5])
def test_seed_everything_seeds_as_lightnings_does(seed, monkeypatch):
    import os
    import random

    import lightning as L
    import numpy as np
    import torch

    from syno_automl.study.context import seed_everything

    def draws() -> tuple:
        return (random.random(), float(np.random.rand()), float(torch.rand(1)),
                os.environ["PL_GLOBAL_SEED"], os.environ["PL_SEED_WORKERS"])

    monkeypatch.setenv("PL_GLOBAL_SEED", "")
    monkeypatch.setenv("PL_SEED_WORKERS", "")
    L.seed_everything(seed % (1 << 32), workers=False, verbose=False)
    lightnings = draws()
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    seed_everything(seed)
    assert draws() == lightnings


_FINGERPRINT = """
import hashlib
def fingerprint(context):
    space = context.space
    state = {k: v.tolist() for k, v in context.substitution.original_model().state_dict().items()}
    text = repr((space.signature(), space.mappings, space.budgets, state, context.timing_example.tolist()))
    return hashlib.sha256(text.encode()).hexdigest()
"""
_TIMING_PROCESS = _FINGERPRINT + """
import pickle, sys
from syno_automl.config import SearchConfig
from syno_automl.study.context import prepare
context = prepare(SearchConfig(model="pointwise_cnn", tracking_uri=None), pickle.loads(sys.stdin.buffer.read()))
print(sorted({m.split(".")[0] for m in sys.modules} & {"lightning", "sklearn", "scipy", "optuna", "mlflow"}))
print(context.datamodule, fingerprint(context))
"""


def test_a_context_prepared_from_its_data_loads_no_data_nor_lightning_and_builds_the_same():
    """The final stage's fresh process prepares its context from ContextData: the same space, model weights and
    timing batch as the search's, without a data module, Lightning, scikit-learn or SciPy (~4.5 s of imports)."""
    import pickle
    import subprocess
    import sys

    context = prepare(SearchConfig(model="pointwise_cnn", tracking_uri=None))
    scope: dict = {}
    exec(_FINGERPRINT, scope)
    out = subprocess.run([sys.executable, "-c", _TIMING_PROCESS], input=pickle.dumps(context.data),
                         capture_output=True, check=True).stdout.decode()
    assert out.splitlines() == ["[]", f"None {scope['fingerprint'](context)}"]
