"""A new local MLflow store is a copy of an empty one MLflow made once (tracking/store_template.py): the same store
as MLflow's own, without its migrations each time, and MLflow's own way wherever the copy cannot be made."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mlflow.store.db import utils as mlflow_db
from mlflow.tracking import MlflowClient

from syno_automl.tracking import SearchTracker
from syno_automl.tracking.store_template import seed_new_store, template_path


@pytest.fixture
def migrations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """A cache of this test's own; each run of MLflow's migrations (its store's or the template's) recorded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ran: list[str] = []
    original = mlflow_db._initialize_tables

    def recording(engine):  # noqa: ANN001, ANN202 - MLflow's signature
        ran.append(str(engine.url))
        return original(engine)

    monkeypatch.setattr(mlflow_db, "_initialize_tables", recording)
    return ran


def _schema(db: Path) -> tuple[list[tuple[str, list[str]]], list[tuple[str]], list[tuple[str, str]]]:
    """Each table's and index's definition, its parts in sorted order (MLflow's migrations rebuild some tables
    with their constraints in an order that varies from run to run); the schema's revision; the experiments."""
    with sqlite3.connect(db) as con:
        tables = [(name, sorted(part.strip() for part in sql.split(",")))
                  for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                               "ORDER BY name")]
        version = con.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = con.execute("SELECT name, lifecycle_stage FROM experiments ORDER BY experiment_id").fetchall()
    return tables, version, experiments


def test_a_copied_store_is_the_store_mlflow_makes(migrations: list[str], tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "own").mkdir()
    (tmp_path / "copied").mkdir()
    MlflowClient(f"sqlite:///{tmp_path / 'own' / 'mlflow.db'}").search_experiments()   # MLflow alone
    assert len(migrations) == 1
    monkeypatch.chdir(tmp_path / "copied")
    tracker = SearchTracker("sqlite:///mlflow.db")
    assert len(migrations) == 2 and template_path().is_file()   # the template's, once; none for the store
    own, copied = _schema(tmp_path / "own" / "mlflow.db"), _schema(tmp_path / "copied" / "mlflow.db")
    assert copied[0] == own[0] and copied[1] == own[1]   # every table, index and the schema's revision
    assert copied[2] == own[2] + [("syno-automl", "active")]   # MLflow's Default experiment, then the search's
    default = tracker.client.get_experiment("0")
    assert default.artifact_location == str(tmp_path / "copied" / "mlruns" / "0")   # this folder's, as MLflow's
    run = tracker.client.create_run(tracker.experiment_id)
    tracker.client.log_metric(run.info.run_id, "val_acc", 0.5)
    assert tracker.client.get_run(run.info.run_id).data.metrics == {"val_acc": 0.5}


def test_later_stores_run_no_migration_and_an_existing_store_is_left_alone(migrations: list[str],
                                                                            tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        SearchTracker(f"sqlite:///{tmp_path / name / 'mlflow.db'}")
    assert len(migrations) == 1   # the template's only
    before = (tmp_path / "a" / "mlflow.db").read_bytes()
    assert not seed_new_store(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}")
    assert (tmp_path / "a" / "mlflow.db").read_bytes() == before
    assert not list(tmp_path.glob("*/.mlflow.db.*"))   # no scratch copy left behind


def test_without_a_cache_mlflow_makes_the_store(migrations: list[str], tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert not seed_new_store(uri)
    tracker = SearchTracker(uri)
    assert len(migrations) == 1 and migrations[0].endswith(str(tmp_path / "mlflow.db"))   # MLflow's own, here
    assert tracker.client.get_experiment(tracker.experiment_id).name == "syno-automl"


def test_a_server_or_a_missing_folder_gets_no_copy(migrations: list[str], tmp_path: Path) -> None:
    assert not seed_new_store("http://127.0.0.1:5000")
    assert not seed_new_store(f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}")
    assert not (tmp_path / "missing").exists() and migrations == []
