"""The language-model task (syno_automl.tasks.lm, tasks/lm_training.py): GPT QKV substitution trained for a
step/time budget, val_loss as the objective."""
from __future__ import annotations

import importlib.util
import math
import sys

import optuna
import pytest
import torch
from _cli_helpers import cli, cli_here, read_runs, read_study
from mlflow.tracking import MlflowClient

from syno_automl.config import SearchConfig, StudyMismatchError
from syno_automl.search.sampler import operator_json_of
from syno_automl.search.time_limits import TrainingTimeBudget
from syno_automl.space import Operator
from syno_automl.study import prepare
from syno_automl.study.opening import open_study
from syno_automl.study.training import train_operator

optuna.logging.set_verbosity(optuna.logging.WARNING)
UNIFORM_LOSS = math.log(256)  # a byte-level model that knows nothing


def _small(**kw) -> SearchConfig:
    return SearchConfig(task="lm", seq_len=32, batch_size=16, val_every=10, val_batches=4, tracking_uri=None,
                        **kw)


@pytest.fixture(scope="module")
def context():
    return prepare(_small())


def test_lm_defaults_and_space(context):
    config = context.config
    assert (config.model, config.dataset, config.layer, config.where) == ("gpt", "text", "linear", "*.qkv")
    assert config.direction == "minimize" and config.objective_name == "val_loss"
    names = [name for name, _ in context.substitution.placeholders]
    assert names == ["blocks.0.attn.qkv", "blocks.1.attn.qkv"]
    assert context.space.input_shape == "[N, C_in]" and context.space.mapping(0)["C_out"] == 3 * 64
    assert "epochs" not in config.settings() and config.settings()["max_steps"] == 200


def test_a_few_steps_with_a_substituted_qkv_reduce_the_loss(context):
    op = next(o for o in context.space.sample(8, seed=3) if 0.1 < context.substitution.flops_ratio(o) <= 0.5)
    loss = train_operator(context, None, None, epochs=0, operator=op, steps=30, timeout=None)
    assert loss < 0.75 * UNIFORM_LOSS, loss  # ~5.5 at the start


def test_the_time_budget_stops_training_and_still_validates(context):
    """100,000 steps would take hours: a 0.5 s budget stops training gracefully and the model is validated."""
    import time

    from syno_automl.search.callbacks import SynoSubstitution
    from syno_automl.study.context import LAYERS
    from syno_automl.tasks.lm_training import train_lm

    op = context.space.sample(1, seed=4)[0]
    substitution = SynoSubstitution(op, LAYERS["linear"], example_input=context.example, where="*.qkv")
    started = time.monotonic()
    loss = train_lm(context, context.task.build(context), None, None, substitution=substitution, steps=100_000,
                    time_budget=0.5)
    assert time.monotonic() - started < 60
    assert math.isfinite(loss) and loss < UNIFORM_LOSS + 1.0
    with pytest.raises(ValueError, match="positive"):
        TrainingTimeBudget(0)


def test_bad_lm_settings_are_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="--dataset must be 'text'"):
        prepare(SearchConfig(task="lm", dataset="digits", tracking_uri=None))
    with pytest.raises(ValueError, match="longer than the model's context"):
        prepare(SearchConfig(task="lm", seq_len=4096, tracking_uri=None))
    with pytest.raises(ValueError, match="--task must be one of"):
        SearchConfig(task="speech")
    with pytest.raises(ValueError, match="--steps must be >= 1"):
        SearchConfig(task="lm", max_steps=0).validate()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        prepare(SearchConfig(task="lm", data_dir=str(tmp_path / "absent"), tracking_uri=None))
    out = cli(tmp_path, "search", "--steps", "10", check=False)
    assert out.returncode == 2 or out.returncode == 1
    assert "--steps only applies to --task lm" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_resume_with_another_task_is_refused(tmp_path, context):
    storage = f"sqlite:///{tmp_path / 's.db'}"
    image = SearchConfig(storage=storage, tracking_uri=None, heartbeat=None)
    image_context = prepare(image)
    open_study(image, image_context)
    lm = _small(storage=storage, heartbeat=None)
    with pytest.raises(StudyMismatchError, match="maximize"):
        open_study(lm, context, resume=True)


@pytest.mark.slow
def test_search_task_lm_end_to_end(tmp_path):
    """`syno-automl search --task lm` on the embedded corpus, then report (loss curves), show, export/replay."""
    # in this process (as the commands after it): what is checked is what the search leaves, not its process
    out = cli_here(tmp_path, "search", "--task", "lm", "--trials", "2", "--steps", "10", "--val-every", "5",
                   "--seq-len", "32", "--time-budget", "60", "--finalists", "1", "--final-seeds", "1",
                   "--final-steps", "10")
    assert "trial 0   baseline          val_loss" in out.stdout and "tokens/s" in out.stdout, out.stdout
    last = out.stdout.strip().splitlines()[-1]  # the final stage's verdict, in nats of val_loss
    assert last.startswith(("fastest operator within 0.01 nats of the baseline's val_loss ",
                            "no operator within 0.01 nats of the baseline's val_loss ")), last
    study = read_study(tmp_path)
    # the default pareto objective: (val_loss, time_ratio: the measured speed objective, cpu.eager runs here), both
    # minimized
    assert study.directions == [optuna.study.StudyDirection.MINIMIZE] * 2 and len(study.trials) == 3
    assert study.metric_names == ["val_loss", "time_ratio"]
    base = study.trials[0]
    assert base.user_attrs["syno.baseline"] and base.values[0] < UNIFORM_LOSS and base.values[1] == 1.0
    assert base.user_attrs["syno.steps"] == 10 and base.user_attrs["syno.tokens_per_s"] > 0
    done = [t for t in study.trials[1:] if t.state.name == "COMPLETE"]
    assert done, [(t.state.name, t.user_attrs.get("syno.failure")) for t in study.trials]
    for t in done:
        assert t.user_attrs["syno.throughput_ratio"] == pytest.approx(
            t.user_attrs["syno.tokens_per_s"] / base.user_attrs["syno.tokens_per_s"])
    # per-step curves in MLflow
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = done[0].user_attrs["syno.mlflow_run_id"]
    train = client.get_metric_history(run_id, "train_loss")
    val = client.get_metric_history(run_id, "val_loss")
    assert sorted(p.step for p in train) == list(range(1, 11))
    assert [p.step for p in sorted(val, key=lambda p: p.step)] == [5, 10]
    assert min(val, key=lambda p: p.step).value >= max(val, key=lambda p: p.step).value - 0.5
    ppl = client.get_metric_history(run_id, "val_ppl")
    assert math.isclose(max(ppl, key=lambda p: p.step).value, math.exp(done[0].values[0]), rel_tol=1e-4)
    assert client.get_run(run_id).data.metrics["throughput_ratio"] > 0
    parent = [r for r in read_runs(tmp_path)
              if r.data.tags.get("syno.role") == "study" or "best_val_loss" in r.data.metrics]
    assert any("best_val_loss" in r.data.metrics and "baseline_val_loss" in r.data.metrics for r in parent)

    report = cli_here(tmp_path, "report", "--out", "rep")
    assert (tmp_path / "rep" / "loss_curves.png").stat().st_size > 10_000
    assert (tmp_path / "rep" / "pareto_flops.svg").exists() and "| val_loss |" in report.stdout

    best = min(done, key=lambda t: t.values[0])
    h = best.user_attrs["syno.hash"]
    shown = cli_here(tmp_path, "show", h[:6]).stdout
    assert f"val_loss: {best.values[0]:.4f}" in shown and "training tokens/s" in shown
    cli_here(tmp_path, "export", h, "-o", "best.py")
    spec = importlib.util.spec_from_file_location("best_op", tmp_path / "best.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["best_op"] = module
    spec.loader.exec_module(module)
    exported = getattr(module, f"Syno_{h}")()
    from syno_automl.space import OperatorSpace

    replayed = Operator.from_json(OperatorSpace(**study.user_attrs["syno.space"]), operator_json_of(best))
    assert replayed.hash == h
    reference = replayed.to_module(0)
    exported.load_state_dict(reference.state_dict())
    x = torch.randn(8, 64)
    torch.testing.assert_close(exported(x), reference(x))


def test_char_tokens_size_the_model_from_the_corpus():
    context = prepare(_small(tokenizer="char"))
    vocab = context.datamodule.vocab_size
    assert context.num_classes == vocab and 60 < vocab != 256
    assert context.build_model().lm_head.out_features == vocab
    op = context.space.sample(1, seed=0)[0]
    loss = train_operator(context, None, None, epochs=0, operator=op, steps=5, timeout=None)
    assert math.isfinite(loss) and loss < math.log(vocab) + 1.0
