"""The names syno-automl writes into Optuna and MLflow, in one place (imports nothing).

Convention: every name starts with ``syno.``. Optuna *user* attributes hold what a person reads (the dashboard
shows them); Optuna *system* attributes hold the sampler's bookkeeping (``syno:``-prefixed, as written by
earlier versions, kept so that their studies still load). MLflow runs are found by the tags TAG_*.

Example:
    >>> from syno_automl import vocabulary as V
    >>> V.HASH
    'syno.hash'
"""
from __future__ import annotations

# -- Optuna study user attributes
SPACE = "syno.space"                  # the OperatorSpace's config (a --resume must match it)
SETTINGS = "syno.settings"            # SearchConfig.settings() of the search (a --resume must match them)
STUDY_RUN_ID = "syno.mlflow_run_id"   # the study's parent MLflow run
LATENCY = "syno.latency"              # {hash: {device: entry}} measured by `syno-automl tune`
FINAL = "syno.final"                  # the final stage's table and verdict (study/verdict.py FinalResult.to_dict)
SPEED_OBJECTIVE = "syno.speed_objective"  # the pareto speed objective the study uses: {"objective": "measured" |
                                      # "planned", "target", "reason" (why planned where measured was asked)}

# -- the companion study of a pareto search (same storage, named <study> + FIDELITY_SUFFIX): single-objective, its
# trials hold the per-epoch val_acc that Optuna's pruners read (they refuse multi-objective studies)
FIDELITY_SUFFIX = ".fidelity"

# -- Optuna trial user attributes
HASH = "syno.hash"                    # the operator's hash
OPERATOR = "syno.operator"            # operator JSON, its one home: enqueue_trial({}, user_attrs={OPERATOR: json})
                                      # requests it, the sampler writes the one assigned
BASELINE = "syno.baseline"            # True on the trial that trains the original layers
FAILURE = "syno.failure"              # why the trial failed
PRUNED = "syno.pruned"                # why the trial was pruned
OPENING = "syno.opening"              # on an opening trial: the known form it runs (known.opening)
SCREENED = "syno.screened"            # why the screen pruned the trial before its training (study/screen.py)
SCREEN_SCORE = "syno.screen_score"    # the operator's screen score (relative to the baseline's; higher is better)
FIDELITY_TRIAL = "syno.fidelity_trial"  # pareto: number of the companion study's trial holding its per-epoch values
SEARCH_TRIAL = "syno.search_trial"    # on a companion trial: the number of the search trial it reports for
RUN_ID = "syno.mlflow_run_id"         # the trial's MLflow run
FLOPS = "syno.flops"
PARAMS = "syno.params"
FLOPS_RATIO = "syno.flops_ratio"
BASELINE_FLOPS = "syno.baseline_flops"
STEPS = "syno.steps"
TOKENS_PER_S = "syno.tokens_per_s"
THROUGHPUT_RATIO = "syno.throughput_ratio"
COST = "syno.cost"                    # planned cost (Operator.cost "total") summed over the replaced layers
COST_RATIO = "syno.cost_ratio"        # COST / the replaced layers' cost
MATERIALIZED = "syno.materialized"    # elements the plan materializes
PEAK = "syno.peak"                    # largest tensor of the plan, in elements
LATENCY_FAILURE = "syno.latency_failure"  # why the latency of the trial's operator could not be measured
SPEED = "syno.speed"                  # the trial's measured speed: the estimate, its conditions, the store key,
                                      # the trial that took it (study/trial_speed.py); beside it speedup_attr's
SPEED_FAILURE = "syno.speed_failure"  # why the trial's speed could not be measured


def speedup_attr(target: str, bound: str = "") -> str:
    """The trial user attr of its measured speedup on ``target`` (``syno.speedup.cpu.eager``; ``bound`` ``low`` /
    ``high``: its 95 % interval's ends)."""
    return "syno." + speedup_metric(target, bound)
# (a trial's own latency entries are under LATENCY too: {device: entry})

# -- Optuna constraint (system attribute constraints:<name>): 1.0 on the baseline trial, so that the baseline is
# infeasible and study.best_trial (accuracy studies), study.best_trials (pareto studies: the operators' front) and
# optuna-dashboard's Best Trial hold operators, never the baseline
BASELINE_CONSTRAINT = "syno.baseline"

# -- Optuna trial system attributes (the sampler's)
SYS_OPERATOR = "syno:operator"        # earlier versions' second copy of OPERATOR: read in old studies, not written
SYS_LEAF = "syno:leaf"                # steps of the operator's path inside the MCTS tree
SYS_SOURCE = "syno:source"            # "mcts" | "fallback" | "enqueued"
SYS_ERROR = "syno:error"              # why no operator could be given
SYS_MEASUREMENT = "syno:measurement:"  # study system attrs: one speed measurement each, keyed by the digest of
                                        # (operator, sizes, target, precision, device, torch) (speed/store.py)

# -- MLflow metrics (beside the objective val_acc / val_loss); "num_params", not "params" (MLflow's Parameters)
METRIC_FLOPS = "flops"
METRIC_NUM_PARAMS = "num_params"
METRIC_FLOPS_RATIO = "flops_ratio"
METRIC_SCREEN_SCORE = "screen_score"     # the trial's screen score (study/screen.py), beside V.SCREEN_SCORE

# -- MLflow latency metrics, one triple per measured device (``llvm``, ``cuda``, ``torch``, ``inductor-llvm`` ...)
INDUCTOR = "inductor-"                # prefix of the device name of a TorchInductor figure: inductor-<device>


def latency_metric(device: str) -> str:
    """The operator's latency in ms on ``device`` (summed over the replaced layers)."""
    return f"latency_ms.{device}"


def baseline_latency_metric(device: str) -> str:
    """The replaced layers' latency in ms on ``device``."""
    return f"baseline_latency_ms.{device}"


def speedup_metric(device: str, bound: str = "") -> str:
    """baseline_latency_metric / latency_metric on ``device``; ``bound`` ``low`` / ``high``: its 95 % interval's
    ends (``speedup.cpu.eager.low``)."""
    return f"speedup.{device}" + (f".{bound}" if bound else "")

# -- what an operator's MLflow run holds of it beside the search settings (params ``search.<setting>``) and its tag
# syno.hash (TAG_HASH): the tags syno.depth and syno.primitives (tags, not params: MLflow's Compare opens on the
# params that differ, and a baseline, which has no depth, made the operators' depth differ even where it was equal)
TAG_DEPTH = "syno.depth"
TAG_SPEED = "syno.speed."                # a trial run's tags of its speed measurement: syno.speed.device, .torch,
                                         # .threads, .precision, .batch, .target, .key (the store's digest): tags,
                                         # so that no string is a Compare axis
TAG_PRIMITIVES = "syno.primitives"       # an operator run's primitives, forward order (a tag: not a Compare axis)


def schedule_label_tag(device: str) -> str:
    """The tag saying how both sides of a latency figure on ``device`` were scheduled (tuned, untuned, eager)."""
    return f"syno.schedules.{device}"


def note_tag(metric: str) -> str:
    """The tag saying why a latency metric is missing."""
    return f"syno.note.{metric}"


# -- MLflow tags
TAG_STUDY = "syno.study"
TAG_ROLE = "syno.role"                # "study" | "trial" | "reevaluation" | "final"
TAG_TRIAL = "syno.trial"
TAG_HASH = "syno.hash"
TAG_FAILURE = "syno.failure"
TAG_PRUNED = "syno.pruned"
TAG_BEST_HASH = "syno.best_hash"
TAG_SEARCH_TRIAL = "syno.search_trial"    # a final / reevaluation run: the search trial it re-trains
TAG_FINAL_VERDICT = "syno.final_verdict"  # the study run: the final stage's verdict line
TAG_FINAL_HASH = "syno.final_hash"        # the study run: the operator the verdict names, or "none"
TAG_SEARCH_RUN_ID = "syno.search_run_id"  # a reevaluation run: the MLflow run of the search trial it re-trains
TAG_STOPPED_BY = "syno.stopped_by"        # an lm trial run: what stopped its training (its time budget)
ROLE_FINAL = "final"                      # TAG_ROLE of a final-stage re-training run (one per finalist + baseline)

# -- MLflow metrics of the final stage (final runs, and the study run for the named / best operator)
METRIC_FINAL_SPEEDUP = "final_speedup"        # original model latency / substituted model latency (torch eager)
METRIC_FINAL_LATENCY = "final_latency_ms"     # the model's median latency (the baseline's run: the original's)
METRIC_FINAL_FOUND = "final_found"            # study run: 1 when an operator is within the margin, else 0
METRIC_FINAL_TOKENS_PER_S = "final_tokens_per_s"  # lm: inference tokens/s on a validation batch (speedup x baseline's)


def final_metric(name: str, stat: str | None = None) -> str:
    """``final_<name>`` (the mean over the seeds), ``final_<name>_mean`` / ``_sd``, ``final_<name>_seed`` (one value
    per seed, step = seed)."""
    return f"final_{name}" + (f"_{stat}" if stat else "")

# -- MLflow artifacts of a trial run
ARTIFACT_OPERATOR_JSON = "operator.json"
ARTIFACT_OPERATOR_PY = "operator.py"
ARTIFACT_GRAPH_DOT = "graph.dot"
ARTIFACT_GRAPH_SVG = "graph.svg"
ARTIFACT_FAILURE = "failure.txt"
ARTIFACT_BASELINE = "layers.json"    # the baseline run's: the replaced layers
ARTIFACT_WEIGHTS = "weights.pt"        # the trained operator modules' state dicts (`export --weights`)
ARTIFACT_FINAL = "final.json"          # the study run's: the final stage's figures and verdict (as syno.final)
