"""SynoSampler on real Optuna storages: conformance, enqueue/baseline/retry, reproducibility, many workers."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import optuna
import pytest
from _syno_helpers import check_attrs_written_at_once, objective, propose_sequence, tiny_space, worker
from optuna.testing.pytest_samplers import BasicSamplerTestCase, MultiObjectiveSamplerTestCase
from optuna.trial import TrialState

from syno_automl import vocabulary as V
from syno_automl.errors import OperatorFormatError
from syno_automl.search.mcts import SearchExhaustedError
from syno_automl.search.reward import Reward
from syno_automl.search.sampler import SynoSampler, operator_json_of, suggest_operator
from syno_automl.study.storage import make_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- Optuna's conformance suite (the parts that apply: SynoSampler is not a relative sampler, and it supports
# -- multi-objective studies, so RelativeSamplerTestCase and SingleOnlySamplerTestCase do not apply) ----------
class TestBasicConformance(BasicSamplerTestCase):
    @pytest.fixture
    def sampler(self):
        return lambda: SynoSampler(tiny_space(), seed=0)


class TestMultiObjectiveConformance(MultiObjectiveSamplerTestCase):
    @pytest.fixture
    def sampler(self):
        return lambda: SynoSampler(tiny_space(), seed=0)


# -- single process ---------------------------------------------------------------------------------------
def _study(seed: int = 0, **kw) -> optuna.Study:
    return optuna.create_study(direction="maximize", sampler=SynoSampler(tiny_space(), seed=seed, **kw))


def test_operator_stored_on_the_trial_and_never_repeated():
    study = _study()
    study.optimize(objective, n_trials=30)
    hashes = [t.user_attrs["syno.hash"] for t in study.trials]
    assert len(set(hashes)) == 30
    t = study.trials[3]
    # the JSON has one home, the user attr syno.operator (issue 12: it was also the system attr syno:operator)
    assert V.OPERATOR == "syno.operator" and V.SYS_OPERATOR == "syno:operator"
    assert "syno:operator" not in t.system_attrs
    assert operator_json_of(t) == t.user_attrs["syno.operator"]
    assert json.loads(t.user_attrs["syno.operator"])["hash"] == t.user_attrs["syno.hash"]
    assert t.constraints == {"flops": pytest.approx(t.constraints["flops"])} and t.constraints["flops"] <= 0
    assert study.trials[-1].values[0] == objective.__globals__["pseudo_accuracy"](hashes[-1])


def test_enqueued_operator_is_evaluated_and_not_proposed_again():
    space = tiny_space()
    known = space.sample(1, seed=123)[0]
    study = _study()
    study.enqueue_trial({}, user_attrs={"syno.operator": known.to_json()})
    study.optimize(objective, n_trials=12)
    hashes = [t.user_attrs["syno.hash"] for t in study.trials]
    assert hashes[0] == known.hash and hashes.count(known.hash) == 1
    assert study.trials[0].system_attrs["syno:source"] == "enqueued"


def test_invalid_enqueued_operator_fails_its_trial_only():
    study = _study()
    study.enqueue_trial({}, user_attrs={"syno.operator": '{"format": "syno-operator/1", "path": ["nope"], '
                                                        '"hash": "0000000000000000", "space": {}}'})
    study.optimize(objective, n_trials=3, catch=(OperatorFormatError,))
    states = [t.state for t in study.trials]
    assert states == [TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    with pytest.raises(OperatorFormatError):
        study.sampler.operator_of(study.trials[0])


def test_baseline_trial_has_no_operator():
    study = _study()
    study.enqueue_trial({}, user_attrs={V.BASELINE: True})
    trial = study.ask()
    assert V.OPERATOR not in trial.storage.get_trial_system_attrs(trial._trial_id)
    assert V.OPERATOR not in trial.storage.get_trial(trial._trial_id).user_attrs
    with pytest.raises(ValueError, match="baseline"):
        suggest_operator(trial)
    study.tell(trial, 0.9)
    study.optimize(objective, n_trials=2)
    assert all("syno.hash" in t.user_attrs for t in study.trials[1:])


def test_a_study_of_an_earlier_version_still_reads():
    """Earlier versions stored the JSON twice (system attr syno:operator and user attr syno.operator); an
    enqueued trial's user attr kept the request, its system attr the operator assigned. Such trials still give
    their operators, count as taken, and a new trial of the study stores the JSON once."""
    space = tiny_space()
    ops = space.sample(3, seed=7)
    old = [optuna.create_trial(value=0.5, user_attrs={"syno.hash": op.hash, "syno.operator": op.to_json()},
                               system_attrs={"syno:operator": op.to_json(), "syno:leaf": 2, "syno:source": "mcts"})
           for op in ops[:2]]
    old.append(optuna.create_trial(value=0.4, user_attrs={"syno.hash": ops[2].hash, "syno.operator": "a request"},
                                   system_attrs={"syno:operator": ops[2].to_json(), "syno:source": "enqueued"}))
    study = _study()
    study.add_trials(old)
    for t, op in zip(study.trials, ops):
        assert operator_json_of(t) == op.to_json()
        assert study.sampler.operator_of(t).hash == op.hash
    study.optimize(objective, n_trials=5)
    new = study.trials[3:]
    assert {t.user_attrs["syno.hash"] for t in new}.isdisjoint(op.hash for op in ops)  # old ones are taken
    assert all("syno:operator" not in t.system_attrs and "syno.operator" in t.user_attrs for t in new)
    # a retried old trial (Optuna copies both attrs) keeps its assigned operator: its request is not re-read
    study.enqueue_trial({}, user_attrs=dict(study.trials[2].user_attrs))
    study._storage.set_trial_system_attr(study.trials[-1]._trial_id, "syno:operator", ops[2].to_json())
    trial = study.ask()
    assert suggest_operator(trial).hash == ops[2].hash


def test_other_parameters_use_the_independent_sampler():
    study = _study()
    study.optimize(lambda t: objective(t) + 0 * t.suggest_float("lr", 1e-3, 1.0, log=True), n_trials=5)
    assert all(1e-3 <= t.params["lr"] <= 1.0 for t in study.trials)


def test_exhausted_space_ends_the_study_with_a_clear_message():
    study = optuna.create_study(sampler=SynoSampler(tiny_space(depth=3), seed=0))
    study.optimize(objective, n_trials=9)   # nothing raised: the trial is pruned, the study stops (issue 46, item 3)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 7 and len({t.user_attrs["syno.hash"] for t in complete}) == 7
    assert [t.state for t in study.trials[7:]] == [TrialState.PRUNED]
    with pytest.raises(SearchExhaustedError, match="trial 7: no operator left to propose"):
        study.sampler.operator_of(study.trials[7])


def test_failed_and_pruned_trials_are_low_reward_and_loss_studies_work():
    def flaky(trial):
        suggest_operator(trial)
        if trial.number % 3 == 1:
            raise optuna.TrialPruned()
        if trial.number % 3 == 2:
            raise RuntimeError("boom")
        return 1.0 - objective(trial)

    study = optuna.create_study(direction="minimize",
                                sampler=SynoSampler(tiny_space(), seed=4, reward=Reward.for_loss(upper=1.0)))
    study.optimize(flaky, n_trials=12, catch=(RuntimeError,))
    assert len({t.user_attrs["syno.hash"] for t in study.trials}) == 12
    study.sampler._sync(study)
    tree = study.sampler._tree
    assert len(tree) == 12 and 0.0 <= tree.stats().mean <= 1.0


def test_fresh_sampler_on_a_copy_proposes_what_the_live_one_does():
    study = _study(seed=9)
    study.optimize(objective, n_trials=10)
    copy = optuna.create_study(direction="maximize", sampler=SynoSampler(tiny_space(), seed=9))
    for t in study.trials:
        copy.add_trial(t)
    live_next, fresh_next = study.ask(), copy.ask()
    assert live_next.user_attrs["syno.hash"] == fresh_next.user_attrs["syno.hash"]


def test_threads_share_one_sampler():
    study = _study(seed=2)
    study.optimize(objective, n_trials=16, n_jobs=2)
    hashes = [t.user_attrs["syno.hash"] for t in study.trials]
    assert len(hashes) == 16 and len(set(hashes)) == 16


def test_two_processes_same_seed_same_sequence():
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        a, b = pool.starmap(propose_sequence, [(21, 12), (21, 12)])
    assert a == b == propose_sequence(21, 12)
    assert len(set(a)) == 12


def test_retried_trial_keeps_its_operator(tmp_path):
    """A RUNNING trial whose heartbeat stops is failed and re-queued with the same operator."""
    url = f"sqlite:///{tmp_path / 'hb.db'}"
    storage = make_storage(url, heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(study_name="hb", storage=storage, direction="maximize",
                                sampler=SynoSampler(tiny_space(), seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lost = study.ask()  # never told: its worker "died" (no heartbeat is ever recorded)
        storage.record_heartbeat(lost._trial_id)
    time.sleep(2.5)
    study.optimize(objective, n_trials=3)
    trials = study.trials
    assert trials[0].state == TrialState.FAIL
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == 0)
    assert retry.state == TrialState.COMPLETE
    assert retry.user_attrs["syno.hash"] == trials[0].user_attrs["syno.hash"]
    study.sampler._sync(study)
    assert len(study.sampler._tree) == 3  # 3 complete; the crash is not held against the operator


# -- several worker processes on one storage ------------------------------------------------------------
def _run_workers(url: str, workers: int, n_trials: int, seed: int = 0, sleep: float = 0.05) -> optuna.Study:
    storage = make_storage(url, heartbeat_interval=None)
    optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        pids = pool.starmap(worker, [(url, "shared", n_trials, seed, sleep)] * workers)
    assert len(set(pids)) == workers
    return optuna.load_study(study_name="shared", storage=storage)


def _check_shared(study: optuna.Study, expected: int) -> None:
    trials = study.trials
    assert len(trials) == expected, "lost trials"
    assert all(t.state == TrialState.COMPLETE for t in trials)
    hashes = [operator_json_of(t) and json.loads(operator_json_of(t))["hash"] for t in trials]
    assert len(set(hashes)) == expected, "duplicate operators"


def test_sqlite_two_workers(tmp_path):
    study = _run_workers(f"sqlite:///{tmp_path / 'shared.db'}", 2, 12)
    _check_shared(study, 24)


def test_journal_two_workers(tmp_path):
    study = _run_workers(f"journal:{tmp_path / 'shared.log'}", 2, 12)
    _check_shared(study, 24)


# -- PostgreSQL: a private server under a temp dir --------------------------------------------------------
def _pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return candidates[-1].parent if candidates else None


@pytest.fixture(scope="module")
def postgres_url():
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("CI must provide PostgreSQL server binaries (initdb, pg_ctl)")
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl): apt-get install postgresql")
    pytest.importorskip("psycopg2")
    root = Path(tempfile.mkdtemp(prefix="syno-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: use the Debian package's postgres user
        shutil.chown(root, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    data, log = root / "data", root / "server.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(prefix + [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-N"],
                   check=True, capture_output=True)
    subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
                             f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                             f"-c max_connections=50", "start"], check=True, capture_output=True)
    try:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE syno")
        conn.close()
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/syno"
    finally:
        subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_postgresql_four_workers(postgres_url):
    study = _run_workers(postgres_url, 4, 8)
    _check_shared(study, 32)


def test_attrs_written_at_once_upsert_on_postgresql(postgres_url):
    # optuna_private's multi-row upsert in PostgreSQL's dialect (on SQLite: tests/search/test_optuna_private.py)
    check_attrs_written_at_once(optuna.create_study(storage=make_storage(postgres_url, heartbeat_interval=None),
                                                    study_name="upsert"))
