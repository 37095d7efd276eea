"""A new local MLflow store starts as a copy of an empty one that MLflow made once for its version
(:mod:`syno_automl.runtime.sqlite_template`).

MLflow makes a new SQLite store by running its schema migrations (alembic, about 60 of them): about 1.6 s of CPU at
the start of every search in a new folder (and of every test that searches). The empty store is made by MLflow's
own function (the one its store calls on an empty database); MLflow then opens the copy as any store it finds: it
checks the schema and creates its Default experiment there (with that folder's artifact root), as it would have
after migrating. On any failure MLflow makes the store itself, as before.

Example:
    >>> seed_new_store("http://127.0.0.1:5000")   # a server makes its own store
    False
"""
from __future__ import annotations

from pathlib import Path

from syno_automl.runtime import sqlite_template
from syno_automl.tracking.store import store_database

__all__ = ["seed_new_store", "template_path"]


def _name() -> str:
    import mlflow

    return f"mlflow-{mlflow.__version__}-empty-store.db"


def template_path() -> Path:
    """Where this MLflow version's empty store is kept: ``$XDG_CACHE_HOME/syno_automl`` (``~/.cache`` unset)."""
    return sqlite_template.template_path(_name())


def _initialize(path: str) -> None:
    """The empty store at `path`: MLflow's own initialization (tables, then every migration)."""
    import sqlalchemy
    from mlflow.store.db import utils  # _initialize_tables: what SqlAlchemyStore runs on an empty database

    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        utils._initialize_tables(engine)
    finally:
        engine.dispose()


def _template() -> Path | None:
    """This MLflow version's empty store, made now if it is not in the cache yet; None when it cannot be."""
    try:
        import alembic.util
        import sqlalchemy.exc
        from mlflow.exceptions import MlflowException
    except ImportError:
        return None
    # AttributeError: MLflow's function moved in another version
    return sqlite_template.cached_template(_name(), _initialize, (AttributeError, sqlalchemy.exc.SQLAlchemyError,
                                                                  alembic.util.CommandError, MlflowException))


def seed_new_store(tracking_uri: str) -> bool:
    """Copies the empty store to a local ``sqlite:///`` URI's database when that file does not exist yet; True when
    it did. False (MLflow will make the store) for a server, an existing file, or anything that fails here."""
    return sqlite_template.seed_new_database(store_database(tracking_uri), _template)
