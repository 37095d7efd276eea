"""What a search depends on (SearchConfig), checked before torch, Lightning or MLflow are imported.

A rejected invocation (unknown model, ``--flops-ratio 0``, ...) fails here in a fraction of a second and
creates nothing; `settings_diff` names what a ``--resume`` would change in a study.

Example:
    >>> SearchConfig(flops_ratio=0).validate()
    Traceback (most recent call last):
    ValueError: --flops-ratio must be a positive number, got 0
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from syno_automl.errors import SynoError
from syno_automl.tasks import task_of

__all__ = ["SearchConfig", "StudyExistsError", "StudyMismatchError", "TASKS", "TASK_DEFAULTS", "LAYER_NAMES",
           "MODEL_NAMES", "DATASET_NAMES", "RESUMABLE", "OBJECTIVES", "PRUNERS", "SCREENS", "LEGACY_SETTINGS",
           "with_legacy_settings", "settings_diff", "describe_diff"]

TASKS = ("image", "lm")
OBJECTIVES = ("pareto", "accuracy")   # pareto: (val_acc | val_loss, cost_ratio); accuracy: val_acc | val_loss alone
PRUNERS = ("hyperband", "halving", "none")
SCREENS = ("off", "loss-slope", "naswot")   # search/screen.py: a cheap score before a trial's full training
OPENINGS = ("known", "none")   # known: the space's grouped forms of the replaced layer are the first trials
LAYER_NAMES = ("conv2d", "linear")
# lightning_modules' registries (MODEL_NAMES, DATAMODULE_NAMES) import torch: their names are repeated here so
# that a wrong name fails before the imports (tests/test_cli_workflow.py keeps the two lists equal)
MODEL_NAMES = ("small_cnn", "resnet18", "resnet34", "resnext29_2x64d", "densenet121", "efficientnet_v2_s", "gpt",
               "gpt2")
DATASET_NAMES = ("digits", "mnist", "cifar10", "cifar100", "imagenet-folder", "text")
_LOCAL_DATASETS = ("mnist", "cifar10", "cifar100", "imagenet-folder")
_LM_ONLY = ("max_steps", "time_budget", "val_every", "val_batches", "seq_len", "tokenizer", "max_loss", "final_steps")
_IMAGE_ONLY = ("epochs", "image_size", "milestones", "trial_timeout", "reward_lower", "reward_upper", "pruner",
               "final_epochs", "screen", "screen_threshold")
# what a field left at None means, per task
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "image": {"model": "small_cnn", "dataset": "digits", "layer": "conv2d", "lr": 0.05, "where": None},
    "lm": {"model": "gpt", "dataset": "text", "layer": "linear", "lr": 3e-3, "where": "*.qkv"},
}
# settings a --resume may change: how many trials, where the data lives, the safety time limit, what is
# measured beside training
# (the final stage runs after the trials and changes none of them: a --resume may change it too; the opening is
# enqueued when a study is created, so a --resume's changes nothing)
RESUMABLE = frozenset({"trials", "data_dir", "trial_timeout", "latency_targets", "latency_trials", "latency_margin",
                       "latency_inductor", "finalists", "final_epochs", "final_steps", "final_seeds",
                       "final_margin", "opening"})


# what a study recorded before a setting existed ran with: a --resume of it keeps that behaviour
LEGACY_SETTINGS: dict[str, Any] = {"objective": "accuracy", "pruner": "none", "reward_speedup": 2.0,
                                   "screen": "off", "screen_threshold": None}


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
        if key not in out and not (task == "lm" and key in _IMAGE_ONLY):
            out[key] = value
    return out


class StudyExistsError(SynoError, ValueError):
    """The study already exists in the storage and --resume was not given."""


class StudyMismatchError(SynoError, ValueError):
    """--resume on a study made for another model, dataset, space or training settings."""


@dataclass
class SearchConfig:
    """Everything a search depends on (the CLI's options). Defaults: the embedded digits demo.

    Example:
        >>> SearchConfig(trials=3, epochs=1).settings()["flops_ratio"]
        0.5
    """

    task: str = "image"               # "image" (maximize val_acc) or "lm" (minimize val_loss)
    model: str | None = None          # None: the task's default (small_cnn / gpt)
    dataset: str | None = None        # None: the task's default (digits / text)
    data_dir: str | None = None
    trials: int = 10                  # operator trials, beside the baseline trial
    epochs: int = 2
    storage: str = "sqlite:///syno.db"
    study: str = "syno"
    tracking_uri: str | None = "sqlite:///mlflow.db"  # None: no MLflow
    flops_ratio: float = 0.5
    cost_ratio: float | None = 1.0    # planned cost (FLOPs + materialized elements) vs the replaced layers'; None: off
    seed: int = 0
    layer: str | None = None          # None: the task's default (conv2d / linear)
    where: str | None = None          # glob of the layers to substitute; None: the task's default (lm: *.qkv)
    max_depth: int = 8
    image_size: int | None = None     # dataset default; digits: 8 (its native size)
    batch_size: int = 64
    lr: float | None = None           # None: the task's default (0.05 SGD / 3e-3 AdamW)
    # lm: each trial trains for max_steps steps or time_budget seconds, whichever ends first, validating
    # every val_every steps on val_batches batches; the reward is ((max_loss - val_loss) / max_loss)^power
    max_steps: int = 200
    time_budget: float | None = 60.0
    val_every: int = 50
    val_batches: int = 8
    seq_len: int = 64
    tokenizer: str = "byte"           # "byte" (vocab 256), "char", or "tiktoken:NAME" where installed
    max_loss: float | None = None     # None: ln(vocabulary), the loss of a uniform guess
    # image: an absolute floor {epoch: min val_acc} (the original's early termination); off by default, the
    # pruner prunes relative to the other trials instead
    milestones: dict[int, float] = field(default_factory=dict)
    # "pareto": a multi-objective study (val_acc | val_loss, cost_ratio), study.best_trials the operators' front;
    # "accuracy": single-objective (val_acc | val_loss), as before
    objective: str = "pareto"
    # image: multi-fidelity over epochs with Optuna's HyperbandPruner / SuccessiveHalvingPruner, or none
    pruner: str = "hyperband"
    # image: score each operator cheaply before its training (search/screen.py) and prune it there when the score
    # is below screen_threshold (None: the screen's default); "off": train every operator
    screen: str = "off"
    screen_threshold: float | None = None
    # "known": the study's first operator trials are the replaced layer's grouped forms that the space holds
    # (known.opening: a known trade of accuracy for speed, and a first reward for the tree); "none": MCTS alone
    opening: str = "known"
    reward_speedup: float = 2.0       # pareto: the speedup (1 / cost_ratio) at which accuracy earns full reward
    reward_lower: float | None = None  # None: chance level, 1 / num_classes
    reward_upper: float = 1.0
    reward_power: float = 2.0
    exploration: float = 1.0
    trial_timeout: float | None = 60.0   # safety net: fails > 100x the baseline's step, or 3x over its projection
    heartbeat: int | None = 10
    grace_period: int | None = None
    threads: int | None = None        # torch threads; None: 1 for the embedded digits demo, else torch's default
    # TVM latency per trial (paper Algorithm 1: only operators within the margin of the baseline are tuned)
    latency_targets: tuple[str, ...] = ()   # e.g. ("llvm",), ("llvm", "cuda"); empty: no latency in the search
    latency_trials: int = 0                  # MetaSchedule trials per kernel (0: untuned default schedules)
    latency_margin: float | None = 0.01      # image: val_acc >= baseline - margin; lm: val_loss <= baseline + margin
    latency_inductor: bool = False           # also time operator and layer under torch.compile
    # final stage (search/finalists.py): re-train up to `finalists` operators cheaper than the replaced layers and
    # the baseline for final_epochs (None: 2x epochs; lm: final_steps, None: 2x max_steps, no time budget) with
    # final_seeds seeds each, time the whole models, name the fastest within final_margin of the baseline
    # (image: accuracy lost, absolute; lm: val_loss gained, absolute nats); finalists 0: no final stage
    finalists: int = 3
    final_epochs: int | None = None
    final_steps: int | None = None
    final_seeds: int = 3
    final_margin: float = 0.01

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"--task must be one of {', '.join(TASKS)}, got {self.task!r}")
        for name, value in TASK_DEFAULTS[self.task].items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    @property
    def direction(self) -> str:
        """The direction of the primary objective (val_acc or val_loss)."""
        return task_of(self).direction

    @property
    def objective_name(self) -> str:
        """The primary objective (what a trial trains for)."""
        return task_of(self).objective_name

    @property
    def directions(self) -> list[str]:
        """The study's directions: the primary objective's, and (pareto) the cost ratio's, minimized."""
        return [self.direction] + (["minimize"] if self.objective == "pareto" else [])

    @property
    def objective_names(self) -> list[str]:
        """The study's metric names, one per direction."""
        return [self.objective_name] + (["cost_ratio"] if self.objective == "pareto" else [])

    def validate(self) -> None:
        if self.trials < 0:
            raise ValueError(f"--trials must be >= 0, got {self.trials}")
        if self.epochs < 1:
            raise ValueError(f"--epochs must be >= 1, got {self.epochs}")
        if not (self.flops_ratio > 0 and math.isfinite(self.flops_ratio)):
            raise ValueError(f"--flops-ratio must be a positive number, got {self.flops_ratio}")
        if self.cost_ratio is not None and not (self.cost_ratio > 0 and math.isfinite(self.cost_ratio)):
            raise ValueError(f"--cost-ratio must be a positive number, got {self.cost_ratio}")
        if self.layer not in LAYER_NAMES:
            raise ValueError(f"layer must be one of {', '.join(LAYER_NAMES)}, got {self.layer!r}")
        if self.model not in MODEL_NAMES:
            raise ValueError(f"unknown model {self.model!r}; known models: {', '.join(MODEL_NAMES)}")
        dataset = str(self.dataset).lower().replace("_", "-")
        if dataset not in DATASET_NAMES:
            raise ValueError(f"unknown dataset {self.dataset!r}; known datasets: {', '.join(DATASET_NAMES)}")
        if dataset in _LOCAL_DATASETS and self.data_dir is None:
            raise ValueError(f"dataset {self.dataset!r} is read from a local folder: pass --data-dir (datasets are "
                             f"not downloaded)")
        if self.data_dir is not None and not Path(self.data_dir).exists():
            raise FileNotFoundError(f"--data-dir {self.data_dir} does not exist")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.pruner not in PRUNERS:
            raise ValueError(f"--pruner must be one of {', '.join(PRUNERS)}, got {self.pruner!r}")
        if self.opening not in OPENINGS:
            raise ValueError(f"--opening must be one of {', '.join(OPENINGS)}, got {self.opening!r}")
        if self.screen not in SCREENS:
            raise ValueError(f"--screen must be one of {', '.join(SCREENS)}, got {self.screen!r}")
        if self.screen != "off" and self.task != "image":
            raise ValueError("--screen applies to --task image only")
        if self.screen_threshold is not None and not math.isfinite(self.screen_threshold):
            raise ValueError(f"--screen-threshold must be a finite number, got {self.screen_threshold}")
        if not (self.reward_speedup > 1 and math.isfinite(self.reward_speedup)):
            raise ValueError(f"reward_speedup must be a number > 1, got {self.reward_speedup}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.latency_trials < 0:
            raise ValueError(f"--latency-trials must be >= 0, got {self.latency_trials}")
        if self.latency_margin is not None and not (self.latency_margin >= 0 and math.isfinite(self.latency_margin)):
            raise ValueError(f"--latency-margin must be a non-negative number, got {self.latency_margin}")
        if self.finalists < 0 or self.final_seeds < 1:
            raise ValueError(f"--finalists must be >= 0 and --final-seeds >= 1, got {self.finalists} and "
                             f"{self.final_seeds}")
        if self.final_epochs is not None and self.final_epochs < 1:
            raise ValueError(f"--final-epochs must be >= 1, got {self.final_epochs}")
        if self.final_steps is not None and self.final_steps < 1:
            raise ValueError(f"--final-steps must be >= 1, got {self.final_steps}")
        if (self.final_steps if self.task == "image" else self.final_epochs) is not None:
            raise ValueError("--final-epochs applies to --task image, --final-steps to --task lm")
        if not math.isfinite(self.final_margin):
            raise ValueError(f"--final-margin must be a finite number, got {self.final_margin}")
        if self.task == "lm":
            if self.max_steps < 1:
                raise ValueError(f"--steps must be >= 1, got {self.max_steps}")
            if self.time_budget is not None and not self.time_budget > 0:
                raise ValueError(f"--time-budget must be positive seconds, got {self.time_budget}")
            if self.val_every < 1 or self.val_batches < 1 or self.seq_len < 2:
                raise ValueError("--val-every and val_batches must be >= 1 and --seq-len >= 2")
            if self.max_loss is not None and not (self.max_loss > 0 and math.isfinite(self.max_loss)):
                raise ValueError(f"--max-loss must be a positive number, got {self.max_loss}")

    def settings(self) -> dict[str, Any]:
        """The search settings logged with every run (JSON-able)."""
        d = dataclasses.asdict(self)
        d["milestones"] = {str(k): v for k, v in self.milestones.items()}
        for private in ("storage", "tracking_uri", "heartbeat", "grace_period", "threads"):
            d.pop(private)
        other_task = _LM_ONLY if self.task == "image" else _IMAGE_ONLY
        return {k: v for k, v in d.items() if k not in other_task}


def _comparable(settings: Mapping[str, Any]) -> dict[str, Any]:
    import json

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
