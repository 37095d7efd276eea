"""What a search depends on (SearchConfig), made from the settings table (syno_automl.settings) and checked before
torch, Lightning or MLflow are imported.

A rejected invocation (unknown model, ``--flops-ratio 0``, ...) fails here in a fraction of a second and
creates nothing; `settings_diff` names what a ``--resume`` would change in a study.

Example:
    >>> SearchConfig(flops_ratio=0).validate()
    Traceback (most recent call last):
    syno_automl.settings.SettingRangeError: --flops-ratio must be a positive number, got 0
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syno_automl.errors import SynoError
from syno_automl.settings import (
    DATASET_NAMES,
    GROUPED_MODELS,
    LAYER_NAMES,
    LOCAL_DATASETS,
    MODEL_NAMES,
    MODEL_TASKS,
    SEQUENCE_DATASETS,
    SEQUENCE_MODELS,
    SETTING,
    SETTINGS,
    TASK_OBJECTIVES,
    TASKS,
    DataDirError,
    Setting,
    SettingError,
    SettingTaskError,
)

__all__ = ["SearchConfig", "StudyExistsError", "StudyMismatchError", "TASKS", "LAYER_NAMES", "MODEL_NAMES",
           "DATASET_NAMES", "RESUMABLE", "LEGACY_SETTINGS", "with_legacy_settings", "settings_diff", "describe_diff"]

# settings a --resume may change (the final stage runs after the trials and changes none of them; the opening is
# enqueued when a study is created, so a --resume's changes nothing)
RESUMABLE = frozenset(s.name for s in SETTINGS if s.resumable)
# what a study recorded before a setting existed ran with: a --resume of it keeps that behaviour
LEGACY_SETTINGS: dict[str, Any] = {s.name: s.legacy for s in SETTINGS if s.has_legacy}
_TASKS_OF = {s.name: s.tasks for s in SETTINGS}


def with_legacy_settings(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """`recorded` study settings with the settings it predates filled in as they behaved then (a study
    recorded before ``objective`` existed is single-objective, before ``pruner`` unpruned but by milestones).

    Example:
        >>> with_legacy_settings({"task": "image"})["objective"]
        'accuracy'
    """
    out = dict(recorded)
    task = out.get("task", "image")
    for key, value in LEGACY_SETTINGS.items():
        if key not in out and task in _TASKS_OF[key]:
            out[key] = value
    return out


class StudyExistsError(SynoError, ValueError):
    """The study already exists in the storage and --resume was not given."""


class StudyMismatchError(SynoError, ValueError):
    """--resume on a study made for another model, dataset, space or training settings."""


class _SearchConfigMethods:
    """What SearchConfig does beside holding the settings (its fields come from syno_automl.settings)."""

    # the fields these methods read (SearchConfig declares them; annotations only, no fields of a dataclass here)
    task: str
    objective: str
    dataset: str | None
    data_dir: str | None
    model: str | None
    layer: str | None
    where: str | None
    groups: bool
    image_size: int | None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise SettingError(f"--task must be one of {', '.join(TASKS)}, got {self.task!r}")
        left = [s for s in SETTINGS if s.task_defaults is not None and getattr(self, s.name) is None]
        for s in left:  # a field left at None takes the task's default...
            setattr(self, s.name, s.default_for(self.task))
        dataset = str(self.dataset).lower().replace("_", "-")
        for s in left:  # ... or the dataset's, once the dataset is known (mnist1d: pointwise_cnn1d, conv1d)
            if s.dataset_defaults is not None and self.task in s.tasks and dataset in s.dataset_defaults:
                setattr(self, s.name, s.dataset_defaults[dataset])
        for s in SETTINGS:  # a numeric 'off' of a setting whose None is its default (--cost-ratio 0): None now
            if s.task_defaults is not None and isinstance(s.off, (int, float)) and getattr(self, s.name) == s.off:
                setattr(self, s.name, None)

    @property
    def direction(self) -> str:
        """The direction of the primary objective (val_acc or val_loss)."""
        return TASK_OBJECTIVES[self.task][1]

    @property
    def objective_name(self) -> str:
        """The primary objective (what a trial trains for)."""
        return TASK_OBJECTIVES[self.task][0]

    @property
    def directions(self) -> list[str]:
        """The study's directions: the primary objective's, and (pareto) the cost ratio's, minimized."""
        return [self.direction] + (["minimize"] if self.objective == "pareto" else [])

    def validate(self) -> None:
        """Every setting checked against its table entry (SettingError and its kinds, naming the flag).

        Once per entry point: the CLI, ``run_search`` and ``prepare`` each call it, and a config whose values have
        not changed since it was last validated is not checked again (a changed one, e.g. ``reevaluate``'s epochs,
        is)."""
        if getattr(self, "_validated", None) == self._values():
            return
        self._check()
        self._validated = self._values()

    def _values(self) -> str:
        return json.dumps({s.name: getattr(self, s.name) for s in SETTINGS}, default=repr, sort_keys=True)

    def _check(self) -> None:
        for s in SETTINGS:
            value = s.validate(getattr(self, s.name))
            # a setting of the other task that was clearly asked for (an optional one given, a choice changed) is
            # refused; a count left at another value (epochs=1 in a config shared by both tasks) is ignored
            asked = s.default is None or s.choices is not None
            if self.task not in s.tasks and asked and value != s.default_for(self.task):
                raise SettingTaskError(f"{s.label} applies to --task {' or '.join(s.tasks)}, not {self.task}")
            setattr(self, s.name, value)
        dataset = str(self.dataset).lower().replace("_", "-")
        if dataset not in DATASET_NAMES:
            raise SettingError(f"unknown dataset {self.dataset!r}; known datasets: {', '.join(DATASET_NAMES)}")
        if dataset in LOCAL_DATASETS and self.data_dir is None:
            raise DataDirError(f"dataset {self.dataset!r} is read from a local folder: pass --data-dir (datasets "
                               f"are not downloaded)")
        if self.data_dir is not None and not Path(self.data_dir).exists():
            raise DataDirError(f"--data-dir {self.data_dir} does not exist")
        from syno_automl.data_check import missing_data

        problem = missing_data(dataset, self.data_dir)   # what the data module would say after the imports
        if problem is not None:
            raise DataDirError(problem)
        self._check_model()

    def _check_model(self) -> None:
        """The model is for the task and the data, and has layers to substitute (settings.MODEL_TASKS,
        SEQUENCE_MODELS, GROUPED_MODELS)."""
        model = str(self.model)
        self._check_dimensions(model)
        task = MODEL_TASKS.get(model)
        if task is not None and task != self.task:
            what = "a language model: pass --task lm" if task == "lm" else f"an image model, not for --task {self.task}"
            models = ", ".join(m for m, t in MODEL_TASKS.items() if t == self.task)
            raise SettingTaskError(f"--model {model} is {what} (--task {self.task} models: {models})")
        if model in GROUPED_MODELS and not self.groups and self.layer == "conv2d" and self.where is None:
            raise SettingError(f"--model {model}: its 3x3 convolutions are all grouped, so nothing would be "
                               f"substituted; pass --groups (grouped and depthwise convolutions too)")

    def _check_dimensions(self, model: str) -> None:
        """A model of 1-D sequences (Conv1d) takes a dataset of them, an image model images: the other pairing
        fails inside torch, in its words."""
        if self.task != "image":
            return
        dataset = str(self.dataset).lower().replace("_", "-")
        sequences = ", ".join(SEQUENCE_DATASETS)
        if model in SEQUENCE_MODELS and dataset not in SEQUENCE_DATASETS:
            raise SettingError(f"--model {model} reads 1-D sequences (--dataset {sequences}), not --dataset "
                               f"{self.dataset}")
        if dataset in SEQUENCE_DATASETS:
            if model in MODEL_TASKS and model not in SEQUENCE_MODELS:
                raise SettingError(f"--dataset {dataset} holds 1-D sequences: --model {model} is an image model "
                                   f"(for sequences: {', '.join(SEQUENCE_MODELS)})")
            if self.image_size is not None:
                raise SettingError(f"--image-size does not apply to --dataset {dataset} (1-D sequences)")

    def settings(self) -> dict[str, Any]:
        """The search settings stored with the study and logged to MLflow (JSON-able): the recorded settings
        that apply to the task."""
        out = {s.name: getattr(self, s.name) for s in SETTINGS if s.recorded and self.task in s.tasks}
        if "milestones" in out:
            out["milestones"] = {str(k): v for k, v in out["milestones"].items()}
        return out


def _setting(name: str) -> Any:
    """The field of the settings table's entry `name`: its default (None where the task decides, in
    __post_init__), and the entry itself in the field's metadata."""
    s = SETTING[name]
    if s.default is None and s.task_defaults is not None:
        return field(default=None, metadata={"setting": s})
    if callable(s.default):
        return field(default_factory=s.default, metadata={"setting": s})
    return field(default=s.default, metadata={"setting": s})


def field_type(s: Setting) -> str:
    """The annotation a setting's field carries (tests/test_settings.py holds SearchConfig's fields to it)."""
    written: dict[type, str] = {tuple: "tuple[str, ...]", dict: "dict[int, float]"}
    kind = written.get(s.kind, s.kind.__name__)
    optional = s.optional or (s.default is None and s.task_defaults is not None)
    return f"{kind} | None" if optional else kind


@dataclass
class SearchConfig(_SearchConfigMethods):
    """Everything a search depends on: one field per entry of syno_automl.settings.SETTINGS, in its order (its
    default, range and help are there; each field carries its entry in ``metadata["setting"]``). Defaults: the
    embedded digits demo.

    Example:
        >>> SearchConfig(trials=3, epochs=1).settings()["flops_ratio"]
        0.5
    """

    task: str = _setting("task")
    model: str | None = _setting("model")
    dataset: str | None = _setting("dataset")
    data_dir: str | None = _setting("data_dir")
    layer: str | None = _setting("layer")
    where: str | None = _setting("where")
    image_size: int | None = _setting("image_size")
    groups: bool = _setting("groups")
    batch_size: int = _setting("batch_size")
    flops_ratio: float = _setting("flops_ratio")
    cost_ratio: float | None = _setting("cost_ratio")
    cost_profile: str | None = _setting("cost_profile")
    priors: bool = _setting("priors")
    max_depth: int = _setting("max_depth")
    seed: int = _setting("seed")
    epochs: int = _setting("epochs")
    lr: float | None = _setting("lr")
    lr_schedule: str = _setting("lr_schedule")
    max_steps: int = _setting("max_steps")
    time_budget: float | None = _setting("time_budget")
    seq_len: int = _setting("seq_len")
    val_every: int = _setting("val_every")
    val_batches: int = _setting("val_batches")
    tokenizer: str = _setting("tokenizer")
    max_loss: float | None = _setting("max_loss")
    milestones: dict[int, float] = _setting("milestones")
    trials: int = _setting("trials")
    objective: str = _setting("objective")
    speed_objective: str = _setting("speed_objective")
    speed_process: str | None = _setting("speed_process")
    timing: str | None = _setting("timing")
    speed_batch: int | None = _setting("speed_batch")
    speed_size: int | None = _setting("speed_size")
    compile_mode: str = _setting("compile_mode")
    pruner: str = _setting("pruner")
    opening: str = _setting("opening")
    screen: str = _setting("screen")
    screen_threshold: float | None = _setting("screen_threshold")
    reward_speedup: float = _setting("reward_speedup")
    reward_lower: float | None = _setting("reward_lower")
    reward_upper: float = _setting("reward_upper")
    reward_power: float = _setting("reward_power")
    exploration: float = _setting("exploration")
    flops_bins: int = _setting("flops_bins")
    trial_timeout: float | None = _setting("trial_timeout")
    accelerator: str = _setting("accelerator")
    devices: int = _setting("devices")
    precision: str = _setting("precision")
    speed_target: str = _setting("speed_target")
    also_measure: tuple[str, ...] = _setting("also_measure")
    threads: int | None = _setting("threads")
    storage: str = _setting("storage")
    study: str = _setting("study")
    tracking_uri: str | None = _setting("tracking_uri")
    heartbeat: int | None = _setting("heartbeat")
    grace_period: int | None = _setting("grace_period")
    latency_targets: tuple[str, ...] = _setting("latency_targets")
    latency_trials: int = _setting("latency_trials")
    latency_margin: float | None = _setting("latency_margin")
    latency_inductor: bool = _setting("latency_inductor")
    finalists: int = _setting("finalists")
    final_epochs: int | None = _setting("final_epochs")
    final_steps: int | None = _setting("final_steps")
    final_seeds: int = _setting("final_seeds")
    final_margin: float = _setting("final_margin")


def _comparable(settings: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(settings), default=str))  # tuples as lists, as the storage returns them


def settings_diff(recorded: Mapping[str, Any], now: Mapping[str, Any],
                  ignore: frozenset[str] | set[str] = RESUMABLE) -> dict[str, tuple[Any, Any]]:
    """{key: (recorded, now)} for every setting that differs, `ignore`d keys aside."""
    a, b = _comparable(recorded), _comparable(now)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if k not in ignore and a.get(k) != b.get(k)}


def describe_diff(diff: Mapping[str, tuple[Any, Any]], limit: int = 6) -> str:
    """``epochs 1 (now 5), lr 0.05 (now 0.1)``: short values, at most `limit` keys."""
    def short(value: Any) -> str:
        text = str(value)
        return text if len(text) <= 40 else text[:37] + "..."

    parts = [f"{k} {short(old)} (now {short(new)})" for k, (old, new) in list(diff.items())[:limit]]
    more = len(diff) - limit
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")

