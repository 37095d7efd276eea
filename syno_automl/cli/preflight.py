"""What a command can tell from the files alone, before Optuna, SQLAlchemy, torch or MLflow load (seconds): a
database file that is damaged or is not a database, and a folder the command must write that it cannot. Each is
refused in one line that names the file or folder. Light: the standard library only; creates nothing (the check
of a folder leaves no file behind).

Example:
    >>> check_database("sqlite:///no/such/folder/syno.db", "--storage")   # not there: nothing to check
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from syno_automl.errors import DatabaseFileError, ReadOnlyError

__all__ = ["sqlite_path", "check_database", "check_writable", "check_writable_stores", "SQLITE_HEADER"]

#: the first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html)
SQLITE_HEADER = b"SQLite format 3\x00"
# quick_check reads every page: up to this size it takes well under a second; beyond, only the schema is read
_FULL_CHECK_BYTES = 64 << 20


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (absolute), or None: another database, or in memory."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):].split("?", 1)[0]
    return None if not path or path == ":memory:" else Path(path).resolve()


def check_database(url: str, flag: str) -> None:
    """DatabaseFileError naming the file when `url`'s SQLite file exists and is not a sound SQLite database (another
    kind of file, a truncated or damaged one, a folder). Nothing to check for a file that does not exist (it is
    created, or a command says it is missing) or another database."""
    path = sqlite_path(url)
    if path is None or not os.path.lexists(path):
        return
    fix = f"move it away, or pass {flag} for another"
    if path.is_dir():
        raise DatabaseFileError(f"{flag} {url}: {path} is a folder, not a database file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
        size = path.stat().st_size
    except OSError as e:
        raise DatabaseFileError(f"{flag} {url}: {path} cannot be read ({e.strerror or e})") from None
    if size == 0:
        return   # SQLite's own empty database: the tables are made on first use
    if head != SQLITE_HEADER:
        raise DatabaseFileError(f"{flag} {url}: {path} is not an SQLite database (another kind of file, or damaged "
                                f"at its start); {fix}")
    try:
        with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=10) as con:
            check = "PRAGMA quick_check(1)" if size <= _FULL_CHECK_BYTES else "SELECT count(*) FROM sqlite_master"
            found = con.execute(check).fetchone()
        con.close()
    except sqlite3.OperationalError as e:
        if "locked" in str(e):   # another worker is writing: sound, busy
            return
        raise DatabaseFileError(f"{flag} {url}: {path} is a damaged SQLite database ({e}); {fix}") from None
    except sqlite3.DatabaseError as e:
        raise DatabaseFileError(f"{flag} {url}: {path} is a damaged SQLite database ({e}); {fix}") from None
    if found is not None and isinstance(found[0], str) and found[0] != "ok":
        said = " ".join(found[0].replace("*** in database main ***", "").split())[:160]   # one line
        raise DatabaseFileError(f"{flag} {url}: {path} is a damaged SQLite database (quick_check: {said}); {fix}")


def check_writable(path: Path, what: str) -> None:
    """ReadOnlyError naming `path` when a command that writes it could not: an existing file that cannot be opened
    for writing, or a folder (the file's, when the file does not exist yet) in which no file can be made (a
    read-only folder or filesystem; root too is refused on a read-only mount). A folder that does not exist is
    another check's to report."""
    path = Path(path)
    if path.is_file():
        if not os.access(path, os.W_OK):
            raise ReadOnlyError(f"{what} {path} is read-only: make it writable, or name another")
        path = path.parent
    elif not path.is_dir():
        path = path.parent
    if not path.is_dir():
        return
    try:   # made and gone at once: the one test that holds for every user and filesystem
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ReadOnlyError(f"{what} cannot be written in {path} ({e.strerror or e}): run where it can, or name "
                            f"another place") from None


def check_writable_stores(storage: str, tracking_uri: str | None) -> None:
    """ReadOnlyError when a search could not write its study (a SQLite file or a journal) or its MLflow store (the
    SQLite file and the artifact folder beside it): said before the imports, not after them."""
    path = sqlite_path(storage)
    if path is None and (storage.startswith("journal:") or storage.endswith((".log", ".journal"))):
        path = Path(storage[len("journal:"):] if storage.startswith("journal:") else storage).resolve()
    if path is not None:
        check_writable(path, f"the study's database (--storage {storage})")
    store = sqlite_path(tracking_uri) if tracking_uri else None
    if store is not None:
        check_writable(store, f"MLflow's store (--tracking-uri {tracking_uri})")
        artifacts = store.parent / "mlruns"   # tracking.store.ARTIFACT_FOLDER, beside the database
        if artifacts.is_dir():
            check_writable(artifacts, f"MLflow's artifact folder (--tracking-uri {tracking_uri})")
