"""The search's opening (known.opening, --opening): the replaced layer's grouped forms that the space holds are a
new study's first operator trials, and the tree goes on from their rewards."""
from __future__ import annotations

import dataclasses
import gc

import optuna
import pytest
import torch
import torch.nn.functional as F

from syno_automl import OperatorSpace, known
from syno_automl import vocabulary as V
from syno_automl.cli import build_parser
from syno_automl.cli.options import config_of
from syno_automl.config import SearchConfig
from syno_automl.search.sampler import SynoSampler
from syno_automl.study import prepare
from syno_automl.study.opening import open_study


@pytest.fixture(scope="module")
def context():
    return prepare(SearchConfig(epochs=1, tracking_uri=None, heartbeat=None))


def test_the_default_space_opens_with_the_grouped_conv_it_replaces(context):
    [(label, op)] = known.opening(context.space)
    assert label == "grouped conv2d, s groups"
    assert context.substitution.flops_ratio(op) == pytest.approx(0.5)   # s = 2 groups: half the FLOPs
    for mapping in range(len(context.substitution.mappings)):   # each replaced conv, at its own sizes
        module = op.to_module(mapping).double()
        x = torch.randn(op.program(mapping)["input"]["shape"], dtype=torch.float64)
        (w,) = module.parameters()   # [g, C_out/g, C_in/g, k, k]
        groups, per_group, c_in, k, _ = w.shape
        expected = F.conv2d(x, w.reshape(groups * per_group, c_in, k, k), padding=k // 2, groups=groups)
        with torch.no_grad():
            assert torch.allclose(module(x), expected)


def test_a_dense_space_opens_with_a_block_diagonal_linear_and_an_indivisible_one_with_nothing():
    def space(s: int) -> OperatorSpace:
        return OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], [f"s={s}: 2"],
                             [{"N": 4, "C_in": 8, "C_out": 8}], max_depth=5)

    [(label, op)] = known.opening(space(2))
    assert label == "block-diagonal linear, s groups"
    module = op.to_module(0).double()
    (w,) = module.parameters()   # [g, C_out/g, C_in/g]
    x = torch.randn(4, 8, dtype=torch.float64)
    expected = torch.einsum("ngi,goi->ngo", x.reshape(4, 2, 4), w).reshape(4, 8)
    with torch.no_grad():
        assert torch.allclose(module(x), expected)
    assert known.opening(space(3)) == []   # 3 groups do not divide 8 channels


def _config(tmp_path, **changes) -> SearchConfig:
    return dataclasses.replace(SearchConfig(epochs=1, tracking_uri=None, heartbeat=None, objective="accuracy",
                                            storage=f"sqlite:///{tmp_path / 'syno.db'}"), **changes)


def test_a_new_study_enqueues_the_opening_after_the_baseline_and_a_resume_adds_nothing(context, tmp_path):
    config = _config(tmp_path)
    study = open_study(config, dataclasses.replace(context, config=config))
    base, first = study.trials
    assert base.user_attrs[V.BASELINE]
    [(label, op)] = known.opening(context.space)
    assert first.state == optuna.trial.TrialState.WAITING and first.user_attrs[V.OPENING] == label
    assert op.hash in first.user_attrs[V.OPERATOR]
    # the opening only shapes a new study: a resume with another --opening is allowed and enqueues nothing
    resumed = open_study(_config(tmp_path, opening="none"), context, resume=True)
    assert len(resumed.trials) == 2

    unopened = _config(tmp_path, opening="none", study="unopened")
    assert [t.user_attrs.get(V.BASELINE) for t in open_study(unopened, context).trials] == [True]


def test_a_search_leaves_the_heap_frozen_once_its_study_is_open(tmp_path, monkeypatch):
    """A worker's heap (modules, torch, the model, the space) is out of the collector's full passes once its study is
    open: its first decision reads every trial, which triggers one (bench/sampler.py). The search (run_search, an
    entry point) freezes it; open_study alone leaves a library caller's process as it was
    (tests/runtime/test_process_settings.py). The trials' training is a fixed value here, recording the heap."""
    from syno_automl.runtime import process
    from syno_automl.study import run_search, training

    frozen: list[int] = []

    def train(context, trial, run, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        frozen.append(gc.get_freeze_count())
        return 0.5

    monkeypatch.setattr(training, "train_operator", train)
    monkeypatch.setattr(process, "_heap_frozen", False)   # as in a worker whose study is not open yet
    gc.unfreeze()   # (tests/conftest.py freezes each test file's start, and an earlier search of this worker froze)
    run_search(_config(tmp_path, study="frozen", trials=1, finalists=0, speed_objective="planned"), out=None)
    assert frozen and all(n > 0 for n in frozen)   # frozen before the baseline, the first trial, trained


def test_the_tree_goes_on_from_the_opening_reward(context, tmp_path):
    """The opening's operator runs first (source "enqueued"); later trials are MCTS's and never repeat it."""
    config = _config(tmp_path, study="opened")
    sampler = SynoSampler(context.space, seed=0)
    study = open_study(config, dataclasses.replace(context, config=config), sampler=sampler)
    [(_, opening)] = known.opening(context.space)

    def objective(trial: optuna.Trial) -> float:   # a stand-in score: training is not what is tested here
        if trial.user_attrs.get(V.BASELINE):
            return 0.9
        return 0.9 if sampler.operator_of(trial).hash == opening.hash else 0.1

    study.optimize(objective, n_trials=4)
    ops = [t for t in study.trials if not t.user_attrs.get(V.BASELINE)]
    assert [t.system_attrs[V.SYS_SOURCE] for t in ops] == ["enqueued", "mcts", "mcts"]
    assert ops[0].user_attrs[V.HASH] == opening.hash
    assert len({t.user_attrs[V.HASH] for t in ops}) == 3


def test_the_cli_sets_the_opening_and_refuses_an_unknown_one():
    parser = build_parser()
    assert config_of(parser.parse_args(["search"])).opening == "known"
    assert config_of(parser.parse_args(["search", "--opening", "none"])).opening == "none"
    with pytest.raises(SystemExit):
        parser.parse_args(["search", "--opening", "classic"])
    with pytest.raises(ValueError, match="--opening must be one of"):
        SearchConfig(opening="classic").validate()
