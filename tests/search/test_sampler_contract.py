"""SynoSampler keeps Optuna's whole sampler contract (issue 46, item 1): it pickles (a study with it can be told from
another process), its independent sampler's relative sampling is passed through (Grid, CMA-ES, GP, QMC and
multivariate TPE tune the user's parameters beside the operator), suggest_operator finds it inside a wrapper, and
it runs with n_jobs=2 on SQLite and journal storages. Tiny spaces, objectives that train nothing."""
from __future__ import annotations

import multiprocessing
import pickle
import re
import threading
from pathlib import Path

import optuna
import pytest
from _syno_helpers import tiny_space
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from syno_automl.search.sampler import SynoSampler, suggest_operator

optuna.logging.set_verbosity(optuna.logging.WARNING)
pytestmark = [pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
              pytest.mark.filterwarnings("ignore:Constraints have been set")]   # suggest_operator's FLOPs one

DOCS = Path(__file__).resolve().parents[2] / "docs" / "search.md"


def _hashes(study: optuna.Study) -> list[str]:
    return [t.user_attrs["syno.hash"] for t in study.trials]


def _objective(*floats: str):
    def objective(trial: optuna.Trial) -> float:
        op = suggest_operator(trial)
        xs = [trial.suggest_float(name, -1.0, 1.0) for name in floats]
        return 1.0 / (1 + op.depth) - sum((x - 0.25) ** 2 for x in xs)
    return objective


# -- pickling ----------------------------------------------------------------------------------------------------
def test_a_pickled_sampler_holds_no_lock_or_native_object_and_proposes_the_same():
    sampler = SynoSampler(tiny_space(), seed=3)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_objective(), n_trials=3)
    state = sampler.__getstate__()
    assert not any(isinstance(v, type(threading.RLock())) or type(v).__module__ == "syno_automl._native"
                   for v in state.values())
    assert isinstance(state["space"], dict) and state["space"]["config"] == sampler.space.config()
    copy = pickle.loads(pickle.dumps(study))
    assert copy.sampler.space.config() == sampler.space.config() and copy.sampler.seed == 3
    study.optimize(_objective(), n_trials=3)
    copy.optimize(_objective(), n_trials=3)
    assert _hashes(copy) == _hashes(study) and len(set(_hashes(study))) == 6


def _tell_and_ask(blob: bytes, number: int) -> tuple[str, str]:
    """In a spawned process: tells trial `number` of the pickled study, then runs one more trial."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = pickle.loads(blob)
    study.tell(number, 0.5)
    study.optimize(_objective("x"), n_trials=1)
    last = study.trials[-1]
    return last.user_attrs["syno.hash"], last.state.name


def test_a_pickled_study_is_told_from_another_process(tmp_path):
    study = optuna.create_study(direction="maximize", storage=f"sqlite:///{tmp_path / 'p.db'}",
                                sampler=SynoSampler(tiny_space(), seed=5, prefetch=False))
    study.optimize(_objective("x"), n_trials=2)
    trial = study.ask()
    op = suggest_operator(trial)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        other_hash, other_state = pool.apply(_tell_and_ask, (pickle.dumps(study), trial.number))
    trials = study.trials
    assert trials[trial.number].state == TrialState.COMPLETE and trials[trial.number].value == 0.5
    assert other_state == "COMPLETE" and trials[-1].user_attrs["syno.hash"] == other_hash
    assert len({*_hashes(study), op.hash}) == 4   # the other process proposed an operator not taken


# -- the independent sampler's relative sampling -----------------------------------------------------------------
def _spy_relative(sampler: optuna.samplers.BaseSampler) -> list[dict]:
    """What `sampler.sample_relative` returns, call by call."""
    returned: list[dict] = []
    original = sampler.sample_relative

    def spy(study, trial, search_space):
        out = original(study, trial, search_space)
        returned.append(dict(out))
        return out
    sampler.sample_relative = spy   # type: ignore[method-assign]
    return returned


@pytest.mark.parametrize("name, make, floats", [
    ("cmaes", lambda: optuna.samplers.CmaEsSampler(seed=0, n_startup_trials=2), ("x", "y")),   # CMA-ES: 2-D up
    ("gp", lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=2), ("x",)),
    ("qmc", lambda: optuna.samplers.QMCSampler(seed=0), ("x",)),
    ("tpe", lambda: optuna.samplers.TPESampler(seed=0, multivariate=True, n_startup_trials=2), ("x", "y")),
])
def test_relative_samplers_tune_the_floats_beside_the_operator(name, make, floats):
    inner = make()
    returned = _spy_relative(inner)
    study = optuna.create_study(direction="maximize",
                                sampler=SynoSampler(tiny_space(), seed=0, independent_sampler=inner))
    study.optimize(_objective(*floats), n_trials=5)
    trials = study.trials
    assert all(t.state == TrialState.COMPLETE for t in trials) and len(set(_hashes(study))) == 5
    joint = [(t, r) for t, r in zip(trials, returned) if set(r) == set(floats)]
    assert len(joint) >= 2, f"{name}: relative sampling reached {[sorted(r) for r in returned]}"
    for trial, values in joint:   # the trial's values are the relative sampler's, not an independent fallback
        assert trial.params == values


def test_grid_sampler_values_are_exactly_its_grid_and_it_ends_the_study():
    grid = {"x": [-0.5, 0.0, 0.5], "y": [0.1, 0.2]}
    study = optuna.create_study(direction="maximize", sampler=SynoSampler(
        tiny_space(), seed=0, independent_sampler=optuna.samplers.GridSampler(grid, seed=0)))
    study.optimize(_objective("x", "y"), n_trials=20)
    trials = study.trials
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials)   # the grid, once
    assert sorted((t.params["x"], t.params["y"]) for t in trials) == sorted(
        (x, y) for x in grid["x"] for y in grid["y"])
    assert len(set(_hashes(study))) == 6


# -- wrappers, threads, reseeding ---------------------------------------------------------------------------------
def test_suggest_operator_finds_a_wrapped_syno_sampler():
    def objective(trial: optuna.Trial) -> float:   # the value from the operator alone: the trees see the same
        trial.suggest_float("x", -1.0, 1.0)
        trial.suggest_float("y", -1.0, 1.0)
        return 1.0 / (1 + suggest_operator(trial).depth)

    syno = SynoSampler(tiny_space(), seed=1)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.PartialFixedSampler({"x": 0.125}, syno))
    study.optimize(objective, n_trials=4)
    trials = study.trials
    assert all(t.state == TrialState.COMPLETE and t.params["x"] == 0.125 for t in trials)
    plain = optuna.create_study(direction="maximize", sampler=SynoSampler(tiny_space(), seed=1))
    plain.optimize(objective, n_trials=4)
    assert _hashes(study) == _hashes(plain)   # the same operators as unwrapped


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_two_threads_share_a_sampler(tmp_path, kind):
    storage = f"sqlite:///{tmp_path / 't.db'}" if kind == "sqlite" else \
        JournalStorage(JournalFileBackend(str(tmp_path / "t.log")))
    study = optuna.create_study(direction="maximize", storage=storage,
                                sampler=SynoSampler(tiny_space(), seed=2))
    study.optimize(_objective("x"), n_trials=8, n_jobs=2)
    trials = study.trials
    assert len(trials) == 8 and all(t.state == TrialState.COMPLETE for t in trials)
    assert len(set(_hashes(study))) == 8   # no operator twice, whatever the threads' order


def test_reseeding_changes_no_operator():
    def run(reseed: bool) -> list[str]:
        sampler = SynoSampler(tiny_space(), seed=4)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        for _ in range(4):
            if reseed:
                sampler.reseed_rng()
            study.optimize(_objective("x"), n_trials=1)
        return _hashes(study) + [str(t.params["x"]) for t in study.trials]

    assert run(True) == run(False)   # operators and the default sampler's values: (seed, trial number)


# -- the docs' worked example -------------------------------------------------------------------------------------
def test_the_docs_operator_and_learning_rate_snippet_runs_as_written(capsys):
    text = DOCS.read_text()
    section = text[text.index("### The operator and the learning rate in one study"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    lrs: list[float] = []

    def train_and_evaluate(op, lr):   # no training: a number from the operator and the learning rate
        lrs.append(lr)
        return 1.0 / (1 + op.depth) - abs(lr - 0.01)

    scope = {"space": tiny_space(), "train_and_evaluate": train_and_evaluate}
    exec(compile(snippet, str(DOCS), "exec"), scope)
    study = scope["study"]
    assert len(study.trials) == 8 and len(set(_hashes(study))) == 8
    assert [t.params["lr"] for t in study.trials] == lrs and all(1e-4 <= lr <= 1e-1 for lr in lrs)
    assert study.best_trial.user_attrs["syno.hash"] in capsys.readouterr().out
