"""The search's tasks as objects: ``image`` (classification, maximize val_acc over epochs) and ``lm`` (the GPT's
QKV projections, minimize val_loss under a step and time budget). The search dispatches to ``task_of(config)``.

Example:
    >>> from syno_automl.config import SearchConfig
    >>> task_of(SearchConfig()).name, task_of(SearchConfig(task="lm")).direction
    ('image', 'minimize')
"""
from __future__ import annotations

from typing import Any

from syno_automl.settings import SettingChoiceError
from syno_automl.tasks.base import Task
from syno_automl.tasks.image import ImageTask
from syno_automl.tasks.lm import LMTask

__all__ = ["Task", "ImageTask", "LMTask", "TASK_OBJECTS", "task_of"]

TASK_OBJECTS: dict[str, Task] = {"image": ImageTask(), "lm": LMTask()}


def task_of(config: Any) -> Task:
    """The task object of `config.task` (a SearchConfig, or anything with a ``task`` name)."""
    try:
        return TASK_OBJECTS[config.task]
    except KeyError:
        raise SettingChoiceError(f"--task must be one of {', '.join(TASK_OBJECTS)}, got {config.task!r}") from None
