"""A new local SQLite database that a library sets up by running its schema migrations (MLflow's tracking store,
Optuna's study storage) starts as a copy of an empty one that the library made once for its version.

For one library version the migrated, empty database is the same every time: it is made once, by the library's
own function, kept in the user's cache (:mod:`syno_automl.runtime.user_cache`), and copied where a
new database is asked for; the library then opens the copy as any database it finds. Nothing here is needed: on
any failure (no cache folder, the library's function moved, a file that cannot be written) the caller lets the
library make the database itself.

Example:
    >>> sqlite_file("postgresql://user@host/db") is None, sqlite_file("sqlite:///:memory:") is None
    (True, True)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from syno_automl.runtime.user_cache import user_cache_folder

__all__ = ["cached_template", "seed_new_database", "sqlite_file", "template_path"]


def sqlite_file(url: str) -> Path | None:
    """The database file of a local ``sqlite:///`` URL (absolute); None for a server or an in-memory database."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path).resolve()


def template_path(name: str) -> Path:
    """Where the empty database `name` is kept: ``$XDG_CACHE_HOME/syno_automl/NAME`` (``~/.cache`` unset)."""
    return user_cache_folder() / name


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


def cached_template(name: str, make: Callable[[str], None],
                    errors: tuple[type[BaseException], ...] = ()) -> Path | None:
    """The empty database `name` from the cache, made now by `make` (the library's set-up of the SQLite file at
    the path it is given) when it is not there yet; None when it cannot be (`make` raised one of `errors`, or the
    cache cannot be written). It is made in a file beside its place, then moved there at once: another process
    finds no file or a whole one."""
    template = template_path(name)
    if template.is_file():
        return template
    failures: tuple[type[BaseException], ...] = (OSError, *errors)
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with _scratch_beside(template) as scratch:
            make(scratch)
            os.replace(scratch, template)
    except failures:
        return None
    return template


def seed_new_database(db: Path | None, template: Callable[[], Path | None]) -> bool:
    """Copies the empty database (`template()`: its cached file, or None) to `db` when that file does not exist
    yet; True when it did. False (the library will make the database) for no file (a server), an existing one, a
    missing folder, or anything that fails here."""
    if db is None or db.exists() or not db.parent.is_dir():
        return False
    source = template()
    if source is None:
        return False
    try:
        with _scratch_beside(db) as scratch:
            shutil.copyfile(source, scratch)
            os.link(scratch, db)   # fails if another process's database appeared meanwhile: that one is kept
    except OSError:   # a folder that cannot be written, another process's database: the library decides
        return False
    return True
