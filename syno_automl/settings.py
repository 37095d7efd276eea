"""The one table of search settings: each declared once, with its type, default, allowed values, help, the tasks it
applies to, whether a ``--resume`` may change it, and what a study recorded before it existed ran with.

Everything else is made from this table: ``SearchConfig``'s fields and their checks (syno_automl.config), the
command line's flags and help (syno_automl.cli.options), the settings stored with a study and logged to MLflow
(``search.<name>`` params), the resume rules, and the settings section of docs/search.md
(``python -m syno_automl.settings`` prints it; tests/test_settings.py keeps the two equal). Adding a setting is
one entry here plus the code that uses it. Imports nothing heavy: it is read before torch, Lightning or MLflow.

Example:
    >>> SETTING["flops_ratio"].default, SETTING["flops_ratio"].flag
    (0.5, '--flops-ratio')
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from syno_automl import _native  # the core's option ranges (cheap: the package has imported it already)
from syno_automl.errors import (  # defined with the other errors; re-exported here, where callers have found them
    DataDirError,
    SettingChoiceError,
    SettingError,
    SettingRangeError,
    SettingTaskError,
    SettingTypeError,
    SynoError,
)
from syno_automl.runtime.target import SPEED_TARGETS

__all__ = ["Setting", "SETTINGS", "SETTING", "TASKS", "TASK_OBJECTIVES", "MODEL_NAMES", "MODEL_TASKS", "GROUPED_MODELS",
           "DATASET_NAMES", "LOCAL_DATASETS", "SEQUENCE_DATASETS", "SEQUENCE_MODELS", "LAYER_NAMES", "SPEED_TARGETS",
           "MODEL_COMMANDS", "SPACE_COMMANDS", "REEVALUATE_DEFAULTS",
           "TRAINING_COMMANDS", "STORE_COMMANDS", "SECTIONS", "section_of", "SettingError",
           "SettingTypeError", "SettingRangeError", "SettingChoiceError", "SettingTaskError", "DataDirError",
           "settings_markdown", "comma_list", "FINALIST_RULE"]

TASKS = ("image", "lm")
# what a trial of each task reports (the study's primary objective) and in which direction it is better
TASK_OBJECTIVES: dict[str, tuple[str, str]] = {"image": ("val_acc", "maximize"), "lm": ("val_loss", "minimize")}
LAYER_NAMES = ("conv2d", "conv1d", "linear")
# where and how a model runs: device . execution (syno_automl.cost_profile prices each)
# lightning_modules' registries (MODEL_NAMES, DATAMODULE_NAMES) import torch: their names are repeated here so
# that a wrong name fails before the imports (tests/cli/test_cli_workflow.py keeps the two lists equal), each with the
# task it is for: a model of the other task is refused before the imports too (an image model given tokens fails
# inside torch, in its words)
MODEL_TASKS: dict[str, str] = {"pointwise_cnn": "image", "small_cnn": "image", "pointwise_cnn1d": "image",
                               "small_cnn1d": "image", "resnet18": "image", "resnet34": "image",
                               "resnext29_2x64d": "image", "densenet121": "image", "efficientnet_v2_s": "image",
                               "gpt": "lm", "gpt2": "lm"}
MODEL_NAMES = tuple(MODEL_TASKS)
DATASET_NAMES = ("digits", "mnist1d", "mnist", "cifar10", "cifar100", "imagenet-folder", "text")
LOCAL_DATASETS = ("mnist", "cifar10", "cifar100", "imagenet-folder")   # read from --data-dir, never downloaded
# the datasets of 1-D sequences ([N, C, L]) and the models that read them (Conv1d): either with the other kind fails
SEQUENCE_DATASETS = ("mnist1d",)
SEQUENCE_MODELS = ("pointwise_cnn1d", "small_cnn1d")
# models whose replaceable convolutions are all grouped (ResNeXt's 3x3s): without --groups nothing is substituted
GROUPED_MODELS = ("resnext29_2x64d",)
# the subcommands that take the model and store options (syno_automl.cli builds each from this table)
MODEL_COMMANDS = ("search", "enumerate", "reevaluate", "calibrate")
# the subcommands that train (the training and device options; enumerate and calibrate train nothing)
TRAINING_COMMANDS = ("search", "reevaluate")
# the subcommands that build the space from its budgets: not reevaluate, which re-trains operators the study holds
# (their space and budgets the study's own)
SPACE_COMMANDS = ("search", "enumerate", "calibrate")
# reevaluate re-trains longer than a trial by default: its own defaults of these settings (the help says them)
REEVALUATE_DEFAULTS: dict[str, Any] = {"epochs": 10, "max_steps": 1000}
STORE_COMMANDS = ("search", "show", "list", "export", "report", "reevaluate", "tune", "calibrate")
# which operators the final stage may re-train (study/finalists.py: choose_finalists, far_outside), in the words the
# README and docs/search.md repeat (tests/study/test_finalist_rule.py)
FINALIST_RULE = ("Finalists: completed operators faster than the original in their trial by the study's speed "
                 "objective (measured: time ratio < 1, the default; planned cost ratio < 1 with --speed-objective "
                 "planned or --objective accuracy); one whose trial value is more than 5× --final-margin behind the "
                 "baseline's is not re-trained.")
_BOTH = ("image", "lm")
_UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


def comma_list(text: str) -> tuple[str, ...]:
    """``"llvm, cuda"`` -> ``("llvm", "cuda")``: the command line's form of a list setting."""
    return tuple(t.strip() for t in str(text).split(",") if t.strip())


@dataclass(frozen=True)
class Setting:
    """One search setting. ``name`` is its SearchConfig field, its key in the study's stored settings and (as
    ``search.<name>``) its MLflow param."""

    name: str
    kind: type                      # int, float, str, bool, tuple (of str) or dict
    default: Any
    help: str
    flag: str | None = None         # its command-line flag; None: set from Python only
    commands: tuple[str, ...] = ("search",)
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None    # inclusive
    above: float | None = None      # exclusive
    maximum: float | None = None    # inclusive
    optional: bool = False          # None is allowed (its meaning is in the help)
    off: float | tuple[str, ...] | None = None  # the command-line values that mean None (0: no limit; -1: any
    #                                             negative; words, any case, for a text setting: "none", "off")
    tasks: tuple[str, ...] = _BOTH
    resumable: bool = False         # a --resume may change it (otherwise it must match the study's)
    recorded: bool = True           # stored with the study, logged to MLflow, compared on --resume
    legacy: Any = _UNSET            # what a study recorded before this setting existed ran with
    task_defaults: dict[str, Any] | None = None   # the default per task when ``default`` is None
    dataset_defaults: dict[str, Any] | None = None   # the default per dataset, where it is not the task's
    parse: Callable[[str], Any] | None = None      # the command line's text -> value, beside ``kind``
    metavar: str | None = None
    check: Callable[[Any], str | None] | None = None   # an extra check: a message when the value is wrong

    @property
    def param(self) -> str:
        """Its MLflow param name on the study run."""
        return f"search.{self.name}"

    @property
    def label(self) -> str:
        """How an error names it: its flag, or its field."""
        return self.flag or self.name

    @property
    def has_legacy(self) -> bool:
        return self.legacy is not _UNSET

    def default_for(self, task: str) -> Any:
        if self.default is None and self.task_defaults is not None:
            return self.task_defaults[task]
        return self.default() if callable(self.default) else self.default

    def default_text(self) -> str:
        """The default as the help and the docs say it."""
        if self.default is None and self.task_defaults is not None:
            image, lm = self.task_defaults.get("image"), self.task_defaults.get("lm")
            per_dataset = ", ".join(f"{d}: {_show(v)}" for d, v in (self.dataset_defaults or {}).items())
            text = _show(image) + (f" ({per_dataset})" if per_dataset else "")
            return f"{text}; lm: {_show(lm)}" if image != lm else text
        if self.kind is bool:
            return "off" if not self.default else "on"
        default = self.default() if callable(self.default) else self.default
        if default is None or default == () or default == {}:
            return "none"
        return ",".join(default) if isinstance(default, tuple) else _show(default)

    def from_cli(self, value: Any) -> Any:
        """A parsed command-line value as the setting's value (``off`` -> None; where None means the task's or
        dataset's default, ``off`` stays as given and SearchConfig turns it into None once the defaults are in)."""
        if self.task_defaults is not None and self.off is not None and not isinstance(self.off, tuple):
            return value
        if isinstance(self.off, tuple):
            return None if isinstance(value, str) and value.lower() in self.off else value
        if self.off is not None and value is not None and isinstance(value, (int, float)) and \
                (value == self.off or (self.off < 0 and value < 0)):
            return None
        return value

    def to_cli(self, value: Any) -> Any:
        """A recorded value as the command line would give it (None -> ``off``): what a --resume fills in."""
        if value is None and self.off is not None:
            return self.off[0] if isinstance(self.off, tuple) else self.off
        if isinstance(value, (list, tuple)) and self.kind is tuple:
            return tuple(value)
        return value

    def validate(self, value: Any) -> Any:
        """The value, checked (SettingError naming the flag otherwise); numbers of a float setting become floats."""
        if value is None:
            if self.optional:
                return None
            raise SettingTypeError(f"{self.label} must be given (a {self.kind.__name__}), got None")
        value = self._typed(value)
        if self.choices is not None and value not in self.choices:
            raise SettingChoiceError(f"{self.label} must be one of {', '.join(map(str, self.choices))}, "
                                     f"got {_echo(value)}")
        if self.kind in (int, float):
            self._in_range(value)
        if self.check is not None:
            message = self.check(value)
            if message:
                raise SettingError(f"{self.label} {message}")
        return value

    def _typed(self, value: Any) -> Any:
        ok = {int: lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
              float: lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool),
              str: lambda v: isinstance(v, str), bool: lambda v: isinstance(v, bool),
              tuple: lambda v: isinstance(v, (tuple, list)) and all(isinstance(x, str) for x in v),
              dict: lambda v: isinstance(v, dict)}[self.kind]
        if not ok(value):
            raise SettingTypeError(f"{self.label} must be a {self.kind.__name__}, got {_echo(value)} "
                                   f"(a {type(value).__name__})")
        if self.kind is float:
            if not math.isfinite(value):
                raise SettingRangeError(f"{self.label} must be a finite number, got {value}")
            return float(value)
        return tuple(value) if self.kind is tuple else value

    def _in_range(self, value: float) -> None:
        low = (self.minimum is None or value >= self.minimum) and (self.above is None or value > self.above)
        if low and (self.maximum is None or value <= self.maximum):
            return
        if self.above == 0 and self.maximum is None:
            wanted = "a positive number"
        else:
            parts = [f">= {_show(self.minimum)}" if self.minimum is not None else "",
                     f"> {_show(self.above)}" if self.above is not None else "",
                     f"<= {_show(self.maximum)}" if self.maximum is not None else ""]
            wanted = " and ".join(p for p in parts if p)
        raise SettingRangeError(f"{self.label} must be {wanted}, got {_show(value)}")


def _show(value: Any) -> str:
    return str(value)


def _echo(value: Any, limit: int = 60) -> str:
    """A value in an error message, cut to `limit` characters (a field can be 100,000 characters long)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _tokenizer_check(value: str) -> str | None:
    if value in ("byte", "char") or (value.startswith("tiktoken:") and len(value) > len("tiktoken:")):
        return None
    return f"must be byte, char or tiktoken:NAME, got {_echo(value)}"


# TVM's target kinds (tvm.target.Target's first word), so that a wrong --latency fails before TVM is imported
_TVM_KINDS = ("llvm", "cuda", "c", "rocm", "metal", "vulkan", "opencl", "nvptx", "hexagon", "webgpu")


def _speed_targets_check(value: tuple) -> str | None:
    for target in value:
        if target not in SPEED_TARGETS:
            return f"has {_echo(target)}: a speed target is one of {', '.join(SPEED_TARGETS)}"
    return None


def _latency_targets_check(value: tuple) -> str | None:
    for target in value:
        if target == "torch" or target.startswith("{"):
            continue
        if target.startswith("rpc:"):
            key, _, address = target[4:].rpartition("@")
            host, _, port = address.rpartition(":")
            if key and host and port.isdigit():
                continue
            return f"has {_echo(target)}: an RPC target is rpc:KEY@host:port"
        if target.split()[0] not in _TVM_KINDS:
            return (f"has {_echo(target)}: a target is torch, rpc:KEY@host:port or a TVM target "
                    f"({', '.join(_TVM_KINDS)}, with options)")
    return None


def _folder_check(url: str) -> str | None:
    """A local SQLite or journal file must be in a folder that exists (else the database layer fails late, in its
    own words)."""
    for prefix in ("sqlite:///", "journal:"):
        if url.startswith(prefix) and url[len(prefix):] not in ("", ":memory:"):
            import os

            folder = os.path.dirname(os.path.abspath(url[len(prefix):]))
            if not os.path.isdir(folder):
                return f"names a file in the folder {folder}, which does not exist"
    return None


def _profile_check(value: str) -> str | None:
    """A shipped profile's name, or a profile file that loads (cost_profile reads JSON only: light)."""
    from syno_automl.cost_profile import resolve

    try:
        resolve(value)
    except SynoError as e:
        return f"cannot be used: {e}"
    return None


def _devices_check(value: int) -> str | None:
    # Lightning trains on several devices with DDP, which starts each further rank as a new copy of the running
    # program: here, of the whole search (its study, its trials). A search scales out by workers instead.
    if value > 1:
        return (f"must be 1, got {value}: a trial trains on one device (DDP would start every rank as a new copy "
                f"of the whole search); to use {value} GPUs, run {value} workers on one storage, one per GPU "
                f"(CUDA_VISIBLE_DEVICES=i syno-automl search --resume ...; docs/search.md, 'Several workers')")
    return None


def _milestones_check(value: dict) -> str | None:
    for epoch, floor in value.items():
        if not (isinstance(epoch, int) or (isinstance(epoch, str) and epoch.isdigit())) or \
                not isinstance(floor, (int, float)) or not math.isfinite(floor):
            return f"must map epochs to finite numbers, got {_echo(value)}"
    return None


def _rows() -> list[Setting]:
    S = Setting
    model = MODEL_COMMANDS
    space = SPACE_COMMANDS
    train = TRAINING_COMMANDS
    store = STORE_COMMANDS
    return [
        # -- what is searched: the task, its model, data and layers
        S("task", str, "image", "image: classification, maximize val_acc; lm: the GPT's QKV projections, minimize "
          "val_loss", "--task", model, choices=TASKS),
        S("model", str, None, "model of lightning_modules (digits' and mnist1d's defaults have a pointwise stem, "
          "so that the replaced convs hold all the spatial reach: docs/search.md)", "--model", model,
          choices=MODEL_NAMES, task_defaults={"image": "pointwise_cnn", "lm": "gpt"},
          dataset_defaults={"mnist1d": "pointwise_cnn1d"}),
        S("dataset", str, None, "digits (embedded), mnist1d (embedded: MNIST-1D's sequences, generated by the "
          "mnist1d package), mnist, cifar10, cifar100, imagenet-folder (these from --data-dir); lm: text (embedded: "
          "the Python standard library's sources, or text files in --data-dir)",
          "--dataset", model, task_defaults={"image": "digits", "lm": "text"}),
        S("data_dir", str, None, "folder of a local dataset (not digits or mnist1d; lm: text files)", "--data-dir",
          model, optional=True, resumable=True),
        S("layer", str, None, "the kind of layer replaced", choices=LAYER_NAMES,
          task_defaults={"image": "conv2d", "lm": "linear"}, dataset_defaults={"mnist1d": "conv1d"}),
        S("where", str, None, "glob of the names of the layers replaced (image: every conv but the stem)",
          optional=True, task_defaults={"image": None, "lm": "*.qkv"}),
        S("image_size", int, None, "side of the images (the dataset's own by default; digits: 8; not mnist1d)",
          "--image-size", model, minimum=1, optional=True, tasks=("image",)),
        S("groups", bool, False, "also substitute grouped and depthwise convolutions (ResNeXt's 3x3 convs are all "
          "grouped; the grouped conv itself is then in the space)", "--groups", model, tasks=("image",),
          legacy=False),
        S("batch_size", int, 64, "training batch size (also the batch the layers' sizes, and so the operators' "
          "costs, are taken at)", "--batch-size", model, minimum=1),
        # -- the space and its budgets
        S("flops_ratio", float, 0.5, "FLOPs budget relative to the replaced layers", "--flops-ratio", space,
          above=0),
        S("cost_ratio", float, None, "planned-cost budget (FLOPs + elements materialized, Operator.cost) relative "
          "to the replaced layers; 0 turns it off (mnist1d: 2.0, since a 3-tap Conv1d's plan is mostly the "
          "elements it writes, so at 1.0 only convolutions fit; the measured speed ranks what the budget lets in)",
          "--cost-ratio", space, above=0, optional=True, off=0, task_defaults={"image": 1.0, "lm": 1.0},
          dataset_defaults={"mnist1d": 2.0}),
        S("cost_profile", str, None, "the cost profile that prices --cost-ratio: cpu.eager (today's planned cost: "
          "FLOPs + 256 per element written), cuda.eager, cuda.compiled, or a file from `syno-automl calibrate`; "
          "none: cpu.eager", "--cost-profile", space, optional=True, legacy=None, check=_profile_check),
        S("priors", bool, True, "the original Syno's space priors (syno_automl.priors: every weight meets the input "
          "and the output, bounded outer products, low rank 8, unweighted pooling <= 8, a FLOPs floor of 0.05x, no "
          "channel-interleaved twins); --no-priors searches the whole space", "--no-priors", space, legacy=False),
        S("max_depth", int, 8, "maximum primitives per operator", "--max-depth", space,
          minimum=_native.option_ranges()["max_depth"][0], maximum=_native.option_ranges()["max_depth"][1]),
        S("seed", int, 0, "search seed", "--seed", model),
        # -- training a trial
        S("epochs", int, 3, "training epochs per trial", "--epochs", train, minimum=1, tasks=("image",)),
        S("lr", float, None, "learning rate (SGD; lm: AdamW)", "--lr", train, above=0,
          task_defaults={"image": 0.05, "lm": 3e-3}),
        S("lr_schedule", str, "onecycle", "the learning rate over each training, a trial's and the final stage's "
          "over its own length: onecycle (a rise to 4x --lr over the first quarter, then cosine to 0: the trial's "
          "value ranks operators as the final stage does, docs/search.md), cosine or linear decay to 0, or constant",
          "--lr-schedule", train, choices=("onecycle", "cosine", "linear", "constant"), tasks=("image",),
          legacy="cosine"),
        S("max_steps", int, 200, "training steps per trial", "--steps", train, minimum=1, tasks=("lm",),
          metavar="STEPS"),
        S("time_budget", float, 60.0, "seconds of training per trial; at the budget training stops and the model "
          "is validated; 0: none", "--time-budget", above=0, optional=True, off=0, tasks=("lm",)),
        S("seq_len", int, 64, "tokens per sequence", "--seq-len", model, minimum=2, tasks=("lm",)),
        S("val_every", int, 50, "validate every N steps", "--val-every", train, minimum=1, tasks=("lm",)),
        S("val_batches", int, 8, "batches per validation", minimum=1, tasks=("lm",)),
        S("tokenizer", str, "byte", "byte (vocabulary 256), char, or tiktoken:NAME where installed", "--tokenizer",
          model, tasks=("lm",), check=_tokenizer_check),
        S("max_loss", float, None, "the loss the reward counts from (None: ln(vocabulary), a uniform guess)",
          above=0, optional=True, tasks=("lm",)),
        S("milestones", dict, dict, "an absolute floor {epoch: min val_acc} a trial must reach (the original's "
          "early termination); the pruner prunes relative to the other trials instead", tasks=("image",),
          check=_milestones_check),
        # -- the study
        S("trials", int, 10, "operator trials, beside the baseline (a --resume: the study's own)", "--trials",
          minimum=0, resumable=True),
        S("objective", str, "pareto", "pareto: two objectives, accuracy (lm: loss) and a speed ratio "
          "(--speed-objective), the front in study.best_trials; accuracy: accuracy (lm: loss) alone", "--objective",
          choices=("pareto", "accuracy"), legacy="accuracy"),
        S("speed_objective", str, "measured", "measured: each trial times the whole model against the original on "
          "--target before its training (logged as speedup.<target> with its interval) and pareto's speed objective "
          "is its time ratio, 1 / speedup; falls back to planned, saying so, where this machine cannot run the "
          "target; planned: no timing, the operator's planned cost ratio (deterministic: the same seed gives the "
          "same search whatever the machine's load)", "--speed-objective", choices=("measured", "planned"),
          legacy="planned"),
        S("speed_process", str, None, "where the final stage's two timing sessions run: fresh, a new process each "
          "(nothing the trials left in the search's process weighs on the verdict's figures, and the interval holds "
          "the spread between processes; ~2 s each to start); same, the search's process (default: fresh, or "
          "$SYNO_AUTOML_SPEED_PROCESS)", "--speed-process",
          choices=("fresh", "same"), optional=True, recorded=False),
        S("timing", str, None, "how thorough every timing is (trials, final stage, reevaluate, --latency): standard, "
          "each protocol as written; fast, each shortened to a few 5 ms pairs (the final stage: one session), a "
          "figure in seconds with a wider interval, said in its conditions (smoke runs and tests; a verdict to quote "
          "is timed standard) (default: standard, or $SYNO_AUTOML_TIMING)", "--timing", train,
          choices=("standard", "fast"), optional=True, recorded=False),
        S("speed_batch", int, None, "the batch speed is timed at, apart from training (the trials' speed objective, "
          "the final stage, reevaluate): e.g. 1 for deployed latency; default: the training's timing batch",
          "--speed-batch", train, minimum=1, optional=True, legacy=None),
        S("speed_size", int, None, "the image side speed is timed at, apart from training (H = W; a 1-D model's "
          "length), so an operator searched on small images is timed as it is deployed: e.g. 224; default: the "
          "training's", "--speed-size", train, minimum=1, optional=True, tasks=("image",), legacy=None),
        S("compile_mode", str, "default", "torch.compile's mode on a compiled --target, the same for the original "
          "and every operator: default (with CUDA graphs at batch <= 32 on a GPU: reduce-overhead) or max-autotune "
          "(Inductor's autotuned Triton templates, CUDA graphs)", "--compile-mode", train,
          choices=("default", "max-autotune"), legacy="default"),
        S("pruner", str, "hyperband", "stop trials that learn slower than the others, after each epoch, with "
          "Optuna's HyperbandPruner or SuccessiveHalvingPruner", "--pruner", choices=("hyperband", "halving", "none"),
          tasks=("image",), legacy="none"),
        S("opening", str, "known", "known: the first operator trials are the replaced layer's grouped forms that the "
          "space holds (a grouped conv, a block-diagonal linear), so the tree starts from a known trade of accuracy "
          "for speed; none: MCTS from the first trial", "--opening", choices=("known", "none"), resumable=True),
        S("screen", str, "off", "score each operator cheaply before its training and prune it there when the score "
          "is below --screen-threshold (loss-slope: its loss drop over a few steps vs the baseline's; naswot: a "
          "training-free score at init)", "--screen", choices=("off", "loss-slope", "naswot"), tasks=("image",),
          legacy="off"),
        S("screen_threshold", float, None, "the score an operator must reach with --screen (none: the screen's "
          "own)", "--screen-threshold", optional=True, tasks=("image",), legacy=None),
        S("reward_speedup", float, 2.0, "pareto: the speedup (1 / cost ratio) at which accuracy earns full reward",
          above=1, legacy=2.0),
        S("reward_lower", float, None, "the accuracy the reward counts from (None: chance, 1 / classes)",
          optional=True, tasks=("image",)),
        S("reward_upper", float, 1.0, "the accuracy of full reward", tasks=("image",)),
        S("reward_power", float, 2.0, "the reward's exponent", above=0),
        S("exploration", float, 1.0, "the MCTS's exploration constant", minimum=0),
        S("flops_bins", int, 0, "draw the MCTS's rollouts over this many log-uniform FLOPs bands of the budget (the "
          "least served band first: space.sample's flops_bins) rather than uniformly over the tree, which piles up "
          "at the cheapest operators; 0: uniform", "--flops-bins", ("search",), minimum=0, maximum=64, legacy=0),
        S("trial_timeout", float, 60.0, "safety net: a trial fails when its step takes over 100x the baseline "
          "model's (CPU time, in the same process), or when it runs 3x over its own projection and past this many "
          "seconds; 0: no limit", "--timeout", above=0, optional=True, off=0, tasks=("image",), resumable=True),
        # -- the device trials train on (Lightning's names), every Trainer the package builds
        S("accelerator", str, "auto", "what trials train on: auto (a GPU when there is one), cpu or gpu (Lightning's "
          "names)", "--accelerator", train, choices=("auto", "cpu", "gpu"), resumable=True),
        S("devices", int, 1, "devices per trial (Lightning's devices): 1; one worker per GPU scales a search out",
          "--devices", train, minimum=1, resumable=True, check=_devices_check),
        S("precision", str, "32", "training precision (Lightning's): 32, bf16-mixed or 16-mixed", "--precision",
          train, choices=("32", "bf16-mixed", "16-mixed"), legacy="32"),
        S("speed_target", str, "auto", "where and how the model will run, what the final stage's speedup is measured "
          "on: cpu.eager, cpu.compiled, cuda.eager, cuda.compiled (torch.compile) or cuda.triton (each operator as "
          "its generated Triton kernel, in the compiled model); auto: cuda.compiled when trials "
          "train on a GPU, else cpu.eager", "--target", choices=("auto",) + SPEED_TARGETS, resumable=True,
          legacy="cpu.eager", metavar="TARGET"),
        S("also_measure", tuple, (), "more speed targets the final stage times the finalists on, beside --target "
          "(e.g. cpu.eager,cuda.eager): each logged as speedup.<target> and printed after the table; the verdict "
          "and the budget keep --target's", "--also-measure", resumable=True, parse=comma_list, metavar="TARGETS",
          legacy=(), check=_speed_targets_check),
        S("threads", int, None, "torch threads (none: 1 for the embedded datasets, else torch's default)",
          "--threads", minimum=1, optional=True, recorded=False),
        # -- where the study and its runs live
        S("storage", str, "sqlite:///syno.db", "Optuna storage: sqlite:///syno.db, postgresql://..., or "
          "journal:PATH", "--storage", store, recorded=False, check=_folder_check),
        S("study", str, "syno", "study name", "--study", store, recorded=False),
        S("tracking_uri", str, "sqlite:///mlflow.db", "MLflow tracking URI, or 'none' (artifacts under ./mlruns)",
          "--tracking-uri", store, optional=True, off=("none", "off", ""), recorded=False, check=_folder_check),
        S("heartbeat", int, 10, "seconds between worker heartbeats (RDB storages); a trial silent for 3x this is "
          "failed and retried with its operator; 0: off", "--heartbeat", minimum=1, optional=True, off=0,
          recorded=False),
        S("grace_period", int, None, "seconds a trial may go without a heartbeat (none: Optuna's, 2x heartbeat)",
          minimum=1, optional=True, recorded=False),
        # -- latency measured beside training (paper Algorithm 1: only operators within the margin are tuned)
        S("latency_targets", tuple, (), "TVM latency of each trial's operator vs the replaced layers on these "
          "targets, e.g. llvm or llvm,cuda or rpc:KEY@host:port, or torch (eager PyTorch, no TVM needed)",
          "--latency", resumable=True, parse=comma_list, metavar="TARGETS", check=_latency_targets_check),
        S("latency_trials", int, 0, "MetaSchedule trials per kernel for --latency (0: untuned default schedules, "
          "labelled so)", "--latency-trials", minimum=0, resumable=True),
        S("latency_margin", float, 0.01, "measure only trials within this margin of the baseline's value (paper "
          "Algorithm 1); negative: every trial", "--latency-margin", minimum=0, optional=True, off=-1,
          resumable=True),
        S("latency_inductor", bool, False, "also time both under torch.compile", "--latency-inductor",
          resumable=True),
        # -- the final stage (study/finalists.py) and its verdict
        S("finalists", int, 3, "final stage: re-train this many operators (best first) and the baseline alike, "
          "time the whole models, and name the fastest within --final-margin of the baseline; 0: no final stage. "
          f"{FINALIST_RULE}", "--finalists", minimum=0, resumable=True),
        S("final_epochs", int, None, "final stage: training epochs (none: twice --epochs)", "--final-epochs",
          minimum=1, optional=True, tasks=("image",), resumable=True),
        S("final_steps", int, None, "lm final stage: training steps, without --time-budget (none: twice --steps)",
          "--final-steps", minimum=1, optional=True, tasks=("lm",), resumable=True),
        S("final_seeds", int, 3, "final stage: training seeds per model, reported as mean ± sd", "--final-seeds",
          minimum=1, resumable=True),
        S("final_margin", float, 0.01, "final stage: the accuracy an operator may lose against the baseline, "
          "absolute (0.01 = 1 pp); lm: the val_loss it may gain, in nats (0.01: ~1 % perplexity)",
          "--final-margin", minimum=0, resumable=True),
    ]


SETTINGS: tuple[Setting, ...] = tuple(_rows())
SETTING: dict[str, Setting] = {s.name: s for s in SETTINGS}
# the table's sections, each named by its first setting: a subcommand's --help groups its flags under these titles
SECTIONS: tuple[tuple[str, str], ...] = (
    ("task", "what is searched: the task, its model, data and layers"),
    ("flops_ratio", "the space and its budgets"),
    ("epochs", "training a trial"),
    ("trials", "the study"),
    ("accelerator", "the device trials train on, and the speed targets"),
    ("storage", "where the study and its runs live"),
    ("latency_targets", "latency measured beside training (TVM or torch)"),
    ("finalists", "the final stage: finalists re-trained alike and timed"),
)


def section_of(setting: Setting) -> str:
    """The title of the table section `setting` is in (:data:`SECTIONS`)."""
    names = [s.name for s in SETTINGS]
    index = names.index(setting.name)
    return next(title for first, title in reversed(SECTIONS) if names.index(first) <= index)


def settings_markdown() -> str:
    """The settings section of docs/search.md (a test keeps the two equal)."""
    lines = ["| setting | flag | default | tasks | on --resume | what it is |", "|---|---|---|---|---|---|"]
    for s in SETTINGS:
        tasks = "all" if s.tasks == _BOTH else ", ".join(s.tasks)
        resume = "not recorded" if not s.recorded else ("may change" if s.resumable else "must match")
        flag = f"`{s.flag}`" if s.flag else "(Python)"
        lines.append(f"| `{s.name}` | {flag} | {s.default_text()} | {tasks} | {resume} | {s.help} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(settings_markdown(), end="")
