"""A new local SQLite study storage is a copy of an empty one Optuna made once (study/storage.py, through
runtime/sqlite_template.py): the same database as Optuna's own, opened without loading its migrations each time,
and Optuna's own way wherever the copy cannot be made."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import optuna
import pytest
import sqlalchemy.exc
from alembic.script import ScriptDirectory

from syno_automl.study.storage import make_storage


@pytest.fixture
def migrations_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """A cache of this test's own; each time Optuna reads its migrations (to set up or check a database) recorded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    loaded: list[str] = []
    original = ScriptDirectory.from_config.__func__

    def recording(cls, config, *args, **kwargs):  # noqa: ANN001, ANN202 - alembic's signature
        loaded.append(config.get_main_option("script_location") or "")
        return original(cls, config, *args, **kwargs)

    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(recording))
    return loaded


def _schema(db: Path) -> tuple[list[tuple[str, str]], list[tuple], list[tuple]]:
    """Every table's and index's definition; the schema's revision; the version row (schema and Optuna)."""
    with sqlite3.connect(db) as con:
        tables = con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
        revision = con.execute("SELECT version_num FROM alembic_version").fetchall()
        version = con.execute("SELECT schema_version, library_version FROM version_info").fetchall()
    return tables, revision, version


def _one_trial(url: str) -> None:
    study = optuna.create_study(study_name="s", storage=make_storage(url, heartbeat_interval=None))
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)


def test_a_copied_storage_is_the_storage_optuna_makes(migrations_loaded: list[str], tmp_path: Path) -> None:
    own, copied = tmp_path / "own.db", tmp_path / "copied.db"
    optuna.storages.RDBStorage(f"sqlite:///{own}")   # Optuna alone
    assert migrations_loaded   # it reads its migrations to set a new database up
    migrations_loaded.clear()
    make_storage(f"sqlite:///{copied}")
    cached = list((tmp_path / "cache" / "syno_automl").glob("optuna-*-empty-storage.db"))
    assert [p.name for p in cached] == [f"optuna-{optuna.__version__}-empty-storage.db"]
    assert _schema(copied) == _schema(own) == _schema(cached[0])
    # a study on the copy, read back by plain Optuna, which checks its schema against this version's
    _one_trial(f"sqlite:///{copied}")
    again = optuna.load_study(study_name="s", storage=f"sqlite:///{copied}")
    assert [t.state for t in again.trials] == [optuna.trial.TrialState.COMPLETE]


def test_later_storages_load_no_migration_and_an_existing_one_is_opened_as_it_is(migrations_loaded: list[str],
                                                                                 tmp_path: Path) -> None:
    make_storage(f"sqlite:///{tmp_path / 'a.db'}")   # the template made
    migrations_loaded.clear()
    for name in ("b", "c"):
        make_storage(f"sqlite:///{tmp_path / name}.db")
    assert migrations_loaded == []   # copies of this version's empty storage: nothing to set up nor check
    _one_trial(f"sqlite:///{tmp_path / 'b.db'}")
    before = (tmp_path / "b.db").read_bytes()
    storage = make_storage(f"sqlite:///{tmp_path / 'b.db'}")   # an existing storage: Optuna checks its schema
    assert migrations_loaded and (tmp_path / "b.db").read_bytes() == before
    assert [s.study_name for s in storage.get_all_studies()] == ["s"]
    assert not list(tmp_path.glob(".*.tmp"))   # no scratch copy left behind


def test_without_a_cache_optuna_makes_the_storage(migrations_loaded: list[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    make_storage(f"sqlite:///{tmp_path / 'syno.db'}")
    assert migrations_loaded   # Optuna's own set-up, here
    _one_trial(f"sqlite:///{tmp_path / 'syno.db'}")


def test_a_journal_an_in_memory_database_or_a_missing_folder_gets_no_copy(migrations_loaded: list[str],
                                                                          tmp_path: Path) -> None:
    make_storage(f"journal:{tmp_path / 'syno.log'}")
    make_storage("sqlite:///:memory:")
    with pytest.raises(sqlalchemy.exc.OperationalError):   # SQLite's own error, as before: no such folder
        make_storage(f"sqlite:///{tmp_path / 'missing' / 'syno.db'}")
    assert not (tmp_path / "missing").exists() and not (tmp_path / "cache").exists()
