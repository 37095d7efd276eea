"""A new local MLflow store starts as a copy of an empty one that MLflow made once for its version.

MLflow makes a new SQLite store by running its schema migrations (alembic, about 60 of them): about 1.6 s of CPU at
the start of every search in a new folder (and of every test that searches). For one MLflow version the migrated,
empty database is the same every time, so it is made once, by MLflow's own function (the one its store calls on an
empty database), kept in the user's cache, and copied where a new store is asked for. MLflow then opens the copy as
any store it finds: it checks the schema and creates its Default experiment there (with that folder's artifact
root), as it would have after migrating. Nothing here is needed: on any failure (no cache folder, MLflow's function
moved, a copy that cannot be written) MLflow makes the store itself, as before.

Example:
    >>> seed_new_store("http://127.0.0.1:5000")   # a server makes its own store
    False
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from syno_automl.tracking.store import store_database

__all__ = ["seed_new_store", "template_path"]

CACHE_ENV = "XDG_CACHE_HOME"


def template_path() -> Path:
    """Where this MLflow version's empty store is kept: ``$XDG_CACHE_HOME/syno_automl`` (``~/.cache`` unset)."""
    import mlflow

    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache") / "syno_automl"
    return cache / f"mlflow-{mlflow.__version__}-empty-store.db"


@contextlib.contextmanager
def _scratch_beside(path: Path) -> Iterator[str]:
    """A new empty file in `path`'s folder (a rename or a link to `path` then stays on one filesystem), removed on
    the way out if it is still there."""
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield scratch
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)


def _make_template(path: Path) -> None:
    """The empty store, made by MLflow's own initialization (tables, then every migration) in a file beside `path`,
    then moved there at once: another process finds no file or a whole one."""
    import sqlalchemy
    from mlflow.store.db import utils  # _initialize_tables: what SqlAlchemyStore runs on an empty database

    path.parent.mkdir(parents=True, exist_ok=True)
    with _scratch_beside(path) as scratch:
        engine = sqlalchemy.create_engine(f"sqlite:///{scratch}")
        try:
            utils._initialize_tables(engine)
        finally:
            engine.dispose()
        os.replace(scratch, path)


def _template() -> Path | None:
    """This MLflow version's empty store, made now if it is not in the cache yet; None when it cannot be."""
    try:
        import alembic.util
        import sqlalchemy.exc
        from mlflow.exceptions import MlflowException
    except ImportError:
        return None
    template = template_path()
    if template.is_file():
        return template
    try:
        _make_template(template)
    except (OSError, AttributeError, sqlalchemy.exc.SQLAlchemyError, alembic.util.CommandError, MlflowException):
        return None   # AttributeError: MLflow's function moved in another version
    return template


def seed_new_store(tracking_uri: str) -> bool:
    """Copies the empty store to a local ``sqlite:///`` URI's database when that file does not exist yet; True when
    it did. False (MLflow will make the store) for a server, an existing file, or anything that fails here."""
    db = store_database(tracking_uri)
    if db is None or db.exists() or not db.parent.is_dir():
        return False
    template = _template()
    if template is None:
        return False
    try:
        with _scratch_beside(db) as scratch:
            shutil.copyfile(template, scratch)
            os.link(scratch, db)   # fails if another worker's store appeared meanwhile: that one is kept
    except OSError:   # a folder that cannot be written, another worker's store: MLflow decides
        return False
    return True
