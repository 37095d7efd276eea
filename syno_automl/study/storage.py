"""Optuna storages for a search: an RDB URL (SQLite, PostgreSQL, MySQL) or a journal file.

RDB storages get a heartbeat: a worker killed mid-trial has its trial failed after `grace_period` seconds
and re-queued with the same operator (optuna's RetryHeartbeatStaleTrialCallback copies the system attrs that
hold it). Journal files (``journal:PATH`` or a path ending in ``.log``/``.journal``) have no heartbeat in Optuna.

A new local SQLite storage starts as a copy of an empty one Optuna made once for its version
(:mod:`syno_automl.runtime.sqlite_template`): Optuna sets up a new database by loading its ~30 schema migrations
three times (~0.14 s of CPU, a tenth of a short trial; the test suite makes a few hundred); a copy opens in 0.01 s.

Example:
    >>> storage = make_storage("sqlite:///syno.db", heartbeat_interval=10)   # doctest: +SKIP
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage

from syno_automl.errors import StorageURLError
from syno_automl.interrupt import interrupt_safe
from syno_automl.runtime import sqlite_template
from syno_automl.vocabulary import FIDELITY_SUFFIX

__all__ = ["make_storage", "is_journal", "study_names", "DRIVER_PACKAGES"]

# the pip package of each database driver SQLAlchemy imports (the module a missing one names)
DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'", "pymysql": "PyMySQL",
                   "MySQLdb": "mysqlclient", "mysql": "mysql-connector-python", "cx_Oracle": "cx_Oracle",
                   "oracledb": "oracledb", "pyodbc": "pyodbc", "asyncpg": "asyncpg"}


@interrupt_safe
class SafeRDBStorage(RDBStorage):
    """RDBStorage whose writes a Ctrl-C cannot cut in half (see :mod:`syno_automl.interrupt`)."""


@interrupt_safe
class SafeJournalStorage(JournalStorage):
    """JournalStorage whose writes a Ctrl-C cannot cut in half (a lock file left behind blocks every worker)."""


def is_journal(url: str) -> bool:
    return url.startswith("journal:") or url.endswith((".log", ".journal"))


def make_storage(url: str, *, heartbeat_interval: int | None = 10, grace_period: int | None = None,
                 max_retry: int | None = 3) -> BaseStorage:
    """An Optuna storage for `url`. Heartbeat and retry apply to RDB storages only.

    Raises ValueError with one clear line for a URL that is neither a journal file nor an SQLAlchemy URL.
    """
    if is_journal(url):
        path = url[len("journal:"):] if url.startswith("journal:") else url
        if not path:
            raise StorageURLError("journal storage needs a file path: journal:PATH")
        return SafeJournalStorage(JournalFileBackend(path))
    if "://" not in url:
        raise StorageURLError(f"storage {url!r} is neither an SQLAlchemy URL (sqlite:///syno.db, "
                         f"postgresql://user@host/db) nor a journal file (journal:PATH)")
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    heartbeat = {}
    if heartbeat_interval:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            callback = RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        heartbeat = dict(heartbeat_interval=heartbeat_interval,
                         grace_period=grace_period or 3 * heartbeat_interval,
                         heartbeat_stale_trial_callback=callback)
    # a copy of the empty storage this Optuna version made: its schema is this version's, nothing to check
    seeded = sqlite_template.seed_new_database(sqlite_template.sqlite_file(url), _empty_storage)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return SafeRDBStorage(url, engine_kwargs=engine_kwargs, skip_compatibility_check=seeded, **heartbeat)
    except ImportError as e:
        missing = e.__cause__ if isinstance(e.__cause__, ImportError) else e   # Optuna re-raises its own
        module = (missing.name or "").split(".")[0]
        package = DRIVER_PACKAGES.get(module)
        hint = f": pip install {package}" if package else f" ({missing})"
        if module == "psycopg" and importlib.util.find_spec("psycopg2") is not None:   # SQLAlchemy 2.1's default
            named = url.replace("postgresql://", "postgresql+psycopg2://", 1)
            hint += f", or name the psycopg2 installed here: {named}"
        raise StorageURLError(f"storage {url!r} needs the database driver {module or 'of its dialect'}, which is not "
                              f"installed{hint}") from None


def _set_up_empty_storage(path: str) -> None:
    """An empty storage at `path`, set up by Optuna itself (tables, version row, schema revision)."""
    storage = RDBStorage(f"sqlite:///{path}")
    storage.remove_session()
    storage.engine.dispose()


def _empty_storage() -> Path | None:
    """This Optuna version's empty SQLite storage, from the user's cache (made now if it is not there yet); None
    when it cannot be."""
    import sqlalchemy.exc

    return sqlite_template.cached_template(f"optuna-{optuna.__version__}-empty-storage.db", _set_up_empty_storage,
                                           (sqlalchemy.exc.SQLAlchemyError,))


def study_names(storage: BaseStorage) -> list[str]:
    """The studies of `storage` a user made, sorted: a pareto search's companion study (``<study>.fidelity``,
    syno_automl.search.fidelity) is the search's own bookkeeping and is left out."""
    names = set(optuna.get_all_study_names(storage))
    return sorted(n for n in names if not (n.endswith(FIDELITY_SUFFIX) and n[:-len(FIDELITY_SUFFIX)] in names))
