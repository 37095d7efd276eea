"""The search's tasks as objects (syno_automl.tasks): every task the config accepts has one, each covers every
method the search dispatches to, and the search's one training path is the module attribute a benchmark replaces.
Real SQLite Optuna storage; training replaced by a fixed value (no Lightning fit: fast)."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from syno_automl.config import TASKS, SearchConfig
from syno_automl.study import training
from syno_automl.tasks import TASK_OBJECTS, ImageTask, LMTask, Task, task_of

# what a task must say for itself (the base class raises NotImplementedError for these)
_REQUIRED = [name for name, fn in inspect.getmembers(Task, inspect.isfunction)
             if "raise NotImplementedError" in inspect.getsource(fn)]


def test_every_config_task_has_an_object() -> None:
    assert set(TASK_OBJECTS) == set(TASKS)
    assert {name: type(t) for name, t in TASK_OBJECTS.items()} == {"image": ImageTask, "lm": LMTask}


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("method", _REQUIRED)
def test_each_task_covers_every_dispatched_method(name: str, method: str) -> None:
    assert getattr(type(TASK_OBJECTS[name]), method) is not getattr(Task, method)


@pytest.mark.parametrize("name, objective, direction, budget", [
    ("image", "val_acc", "maximize", ((6, "epochs"), "3 epochs")),
    ("lm", "val_loss", "minimize", ((400, "steps"), "200 steps")),
])
def test_the_config_reads_names_from_its_task(name: str, objective: str, direction: str, budget: tuple) -> None:
    config = SearchConfig(task=name, epochs=3, max_steps=200)
    task = task_of(config)
    assert (config.objective_name, config.direction) == (objective, direction) == (task.objective_name,
                                                                                    task.direction)
    assert (task.final_budget(config), task.budget_label(config)) == budget


def test_an_unknown_task_is_named() -> None:
    class Other:
        task = "audio"

    with pytest.raises(ValueError, match="'audio'"):
        task_of(Other())


def test_the_lm_task_refuses_images() -> None:
    with pytest.raises(ValueError, match="--dataset must be 'text'"):
        LMTask().datamodule_kwargs(SearchConfig(task="lm", dataset="digits"))


def test_trials_train_through_the_training_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/discovery.py replaces ``search.training.train_operator``: the search's trials must call it there."""
    from syno_automl.study import run_search

    calls: list[int | None] = []

    def fixed(context, trial, run, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        calls.append(trial.number if trial is not None else None)
        return 0.5

    monkeypatch.setattr(training, "train_operator", fixed)
    config = SearchConfig(trials=1, epochs=1, seed=0, storage=f"sqlite:///{tmp_path / 'syno.db'}",
                          tracking_uri=None, heartbeat=None, finalists=0, objective="accuracy")
    result = run_search(config, out=None)
    assert calls == [0, 1]   # the baseline, then one operator trial
    assert [t.value for t in result.study.trials] == [0.5, 0.5]


@pytest.mark.parametrize("task, value, classes, warned", [
    (ImageTask(), 0.109, 10, True),     # ResNet-34 after 1 epoch on 10 classes ranked operators unwarned
    (ImageTask(), 0.16, 10, False),
    (ImageTask(), 0.97, 10, False),
    (LMTask(), 5.50, 256, True),        # ln 256 = 5.545: a uniform guess
    (LMTask(), 2.10, 256, False),
])
def test_a_baseline_near_chance_is_named(task, value, classes, warned):
    reason = task.near_chance(value, classes)
    assert (reason is not None) is warned
    if warned:
        assert f"{value:.3f}" in reason
