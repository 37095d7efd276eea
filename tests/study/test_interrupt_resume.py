"""Interrupts and resumes leave no debris, and a search that produced nothing says so (issue 26, items 2-4).

Deterministic: training is replaced by a fixed value or by an exception raised at a chosen call (the module
attribute the search trains through, study.training.train_operator), the Ctrl-C by a KeyboardInterrupt raised at a
chosen point; real SQLite Optuna storage and a real MLflow tracking store."""
from __future__ import annotations

import datetime
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

import syno_automl.study.training as training
from syno_automl import vocabulary as V
from syno_automl.cli import main
from syno_automl.config import SearchConfig
from syno_automl.search.sampler import SynoSampler
from syno_automl.study import run_search
from syno_automl.study.lost_trials import LOST_IN_CREATION, fail_lost_in_creation
from syno_automl.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _config(tmp_path: Path, **kw) -> SearchConfig:
    # operators of at most 6 primitives, no whole-model timing before each trial (planned): not what is checked here
    settings = dict(trials=2, epochs=1, seed=0, storage=f"sqlite:///{tmp_path / 'syno.db'}", tracking_uri=None,
                    heartbeat=10, finalists=0, objective="accuracy", opening="none", max_depth=6,
                    speed_objective="planned")
    settings.update(kw)
    return SearchConfig(**settings)


def _fixed(value: float = 0.5):
    def train(context, trial, run, **kw) -> float:  # noqa: ANN001 - train_operator's signature
        return value
    return train


def _states(study: optuna.Study) -> list[tuple[bool, str]]:
    return [(bool(t.user_attrs.get(V.BASELINE)), t.state.name) for t in study.trials]


def test_ctrl_c_while_a_trial_is_created_fails_it_and_resume_finishes(tmp_path, monkeypatch):
    monkeypatch.setattr(training, "train_operator", _fixed())
    original = SynoSampler._assign_fresh
    calls = []

    def interrupted(self, study, trial):  # noqa: ANN001 - the sampler's own signature
        calls.append(trial.number)
        if len(calls) == 1:   # inside study.ask(), after the trial exists, before Optuna could tell it
            raise KeyboardInterrupt
        return original(self, study, trial)

    monkeypatch.setattr(SynoSampler, "_assign_fresh", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_search(_config(tmp_path), out=None)
    study = run_search(_config(tmp_path), resume=True, out=None).study
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    lost = study.trials[1]
    assert lost.state == TrialState.FAIL and "interrupted" in lost.user_attrs[V.FAILURE]
    assert sum(t.state == TrialState.COMPLETE and not t.user_attrs.get(V.BASELINE) for t in study.trials) == 2


def test_a_trial_left_running_without_a_heartbeat_is_failed_on_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 'syno.db'}"
    study = optuna.create_study(study_name="s", storage=make_storage(url, heartbeat_interval=10))
    old = datetime.datetime.now() - datetime.timedelta(minutes=5)
    template = optuna.trial.FrozenTrial(number=0, state=TrialState.RUNNING, value=None, datetime_start=old,
                                        datetime_complete=None, params={}, distributions={}, user_attrs={},
                                        system_attrs={}, intermediate_values={}, trial_id=0)
    study._storage.create_new_trial(study._study_id, template_trial=template)   # a worker killed in ask()
    fresh = study.ask()   # a live trial of another worker, just created: kept
    assert fail_lost_in_creation(study) == [0]
    assert study.trials[0].state == TrialState.FAIL and study.trials[0].user_attrs[V.FAILURE] == LOST_IN_CREATION
    assert study.trials[fresh.number].state == TrialState.RUNNING


def test_an_interrupted_baseline_is_trained_again_on_resume(tmp_path, monkeypatch):
    def baseline_interrupted(context, trial, run, **kw) -> float:  # noqa: ANN001
        if trial is not None and trial.user_attrs.get(V.BASELINE):
            raise KeyboardInterrupt
        return 0.5

    monkeypatch.setattr(training, "train_operator", baseline_interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_search(_config(tmp_path), out=None)
    monkeypatch.setattr(training, "train_operator", _fixed())
    study = run_search(_config(tmp_path), resume=True, out=None).study
    assert (True, "FAIL") in _states(study) and (True, "COMPLETE") in _states(study)
    assert _states(study).index((True, "COMPLETE")) == 1   # the first trial of the resumed run


def test_a_search_whose_trials_all_failed_exits_non_zero_with_the_reason(tmp_path, monkeypatch, capsys):
    def operators_fail(context, trial, run, **kw) -> float:  # noqa: ANN001
        if trial is not None and trial.user_attrs.get(V.BASELINE):
            return 0.9
        raise ValueError("loss became NaN")

    monkeypatch.setattr(training, "train_operator", operators_fail)
    monkeypatch.chdir(tmp_path)
    code = main(["search", "--trials", "2", "--epochs", "1", "--finalists", "0", "--tracking-uri", "none",
                 "--opening", "none", "--max-depth", "6", "--speed-objective", "planned", "-q"])
    err = capsys.readouterr()
    assert code == 1
    assert "2 failed" in err.out
    assert "every operator trial failed: ValueError: loss became NaN (2 of 2)" in err.err


def test_resume_without_trials_keeps_the_studys_count_and_trials_0_leaves_nothing_waiting(tmp_path, monkeypatch):
    monkeypatch.setattr(training, "train_operator", _fixed())
    monkeypatch.chdir(tmp_path)
    common = ["--epochs", "1", "--finalists", "0", "--tracking-uri", "none", "--objective", "accuracy", "--max-depth",
              "6", "--speed-objective", "planned", "-q"]
    assert main(["search", "--trials", "0", *common]) == 0
    study = optuna.load_study(study_name="syno", storage=f"sqlite:///{tmp_path / 'syno.db'}")
    assert [t.state.name for t in study.trials] == ["COMPLETE"]   # the baseline; the opening is not enqueued
    assert main(["search", "--trials", "1", "--study", "two", *common]) == 0
    assert main(["search", "--resume", "--study", "two", *common]) == 0
    two = optuna.load_study(study_name="two", storage=f"sqlite:///{tmp_path / 'syno.db'}")
    assert len(two.trials) == 2   # the baseline and the one operator trial: nothing more


def test_ctrl_c_in_the_final_stage_kills_its_run_and_a_new_final_stage_ends_the_abandoned(tmp_path, monkeypatch):
    import functools

    from syno_automl.speed import sessions
    from syno_automl.speed.paired import PairedProtocol
    from syno_automl.study import finalists

    # the stage times its finalists by the paired protocol (up to 40 pairs of blocks, most of a stage whose training
    # is a fixed value); the runs' states are what is checked, not the figures: two pairs
    brief = PairedProtocol(warmup=1, min_block_s=0.005, min_pairs=2, max_pairs=2, batch_pairs=1)
    monkeypatch.setattr(finalists, "measure_final", functools.partial(sessions.measure_final, protocol=brief))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    calls = []

    def final_interrupted(context, trial, run, **kw) -> float:  # noqa: ANN001
        calls.append(trial)
        if trial is not None and not trial.user_attrs.get(V.BASELINE):
            trial.set_user_attr(V.COST_RATIO, 0.5)   # a finalist must be cheaper than the replaced layers
        if trial is None and len([c for c in calls if c is None]) == 1:   # the final stage's first training
            raise KeyboardInterrupt
        return 0.5

    monkeypatch.setattr(training, "train_operator", final_interrupted)
    config = _config(tmp_path, tracking_uri=uri, finalists=1, final_seeds=1, final_epochs=1)
    with pytest.raises(KeyboardInterrupt):
        run_search(config, out=None)
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("syno-automl").experiment_id],
                              filter_string=f"tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'")
    assert [(r.info.run_name, r.info.status) for r in runs] == [("final-baseline", "KILLED")]
    # a run left RUNNING by a killed process (no Ctrl-C handling) is ended by the next final stage
    from syno_automl.tracking import SearchTracker

    tracker = SearchTracker(uri)
    stale = client.create_run(tracker.experiment_id, run_name="final-baseline",
                              tags={V.TAG_STUDY: "syno", V.TAG_ROLE: V.ROLE_FINAL}).info.run_id
    final = run_search(config, resume=True, out=None).final
    assert client.get_run(stale).info.status == "KILLED"
    statuses = [r.info.status for r in client.search_runs(
        [tracker.experiment_id], filter_string=f"tags.`{V.TAG_ROLE}` = '{V.ROLE_FINAL}'")]
    # the baseline and the finalists (equal trial values tie, so the stage may re-train more than --finalists)
    assert "RUNNING" not in statuses and statuses.count("FINISHED") == 1 + len(final.candidates)
