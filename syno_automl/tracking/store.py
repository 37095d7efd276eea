"""Where a local MLflow store keeps its artifacts: in ``mlruns/`` beside its database, recorded as a path relative
to the database's folder, so that a search folder moved or copied reads its own artifacts with nothing to repair.

MLflow records an absolute artifact location per experiment and per run (it makes a relative one absolute when
the experiment is created), so a copy would read the original's artifacts and a moved folder would miss them.
Here the locations of a local ``sqlite:///`` store are rewritten to ``mlruns/...`` once, when the store is opened,
and every read or write of ours resolves them against the database's folder. MLflow's own UI and clients resolve a
relative location against their working folder: started in the search folder (as README shows), they find them.

Example:
    >>> artifact_folder("sqlite:////data/search/mlflow.db", "mlruns/0123/artifacts")
    '/data/search/mlruns/0123/artifacts'
    >>> artifact_folder("http://127.0.0.1:5000", "mlflow-artifacts:/1/0123/artifacts")
    'mlflow-artifacts:/1/0123/artifacts'
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import unquote, urlparse

from syno_automl.runtime.sqlite_template import sqlite_file

__all__ = ["ARTIFACT_FOLDER", "absolute_tracking_uri", "store_database", "store_folder", "artifact_location_for",
           "make_artifact_paths_relative", "artifact_folder", "local_path"]

ARTIFACT_FOLDER = "mlruns"  # beside the database, as MLflow's own default


def absolute_tracking_uri(tracking_uri: str) -> str:
    """A local ``sqlite:///`` URI with its database path made absolute (from the current folder); others as given.

    Example:
        >>> absolute_tracking_uri("http://127.0.0.1:5000")
        'http://127.0.0.1:5000'
    """
    if tracking_uri.startswith("sqlite:///") and not tracking_uri.startswith("sqlite:////"):
        path = tracking_uri[len("sqlite:///"):]
        if path and path != ":memory:" and "?" not in path:
            return "sqlite:///" + str(Path(path).resolve())
    return tracking_uri


def store_database(tracking_uri: str) -> Path | None:
    """The database file of a local ``sqlite:///`` store (absolute); None for a server or an in-memory store."""
    return sqlite_file(tracking_uri)


def store_folder(tracking_uri: str) -> Path | None:
    """The folder of a local ``sqlite:///`` store's database (absolute); None for a server or an in-memory store."""
    db = store_database(tracking_uri)
    return None if db is None else db.parent


def artifact_location_for(tracking_uri: str) -> str | None:
    """``<dir of the database>/mlruns`` for a local ``sqlite:///`` store (MLflow needs it absolute when the
    experiment is created: :func:`make_artifact_paths_relative` then records it relative); None (the server
    decides) otherwise."""
    folder = store_folder(tracking_uri)
    return None if folder is None else (folder / ARTIFACT_FOLDER).as_uri()


def local_path(location: str) -> Path | None:
    """The filesystem path of a local artifact location (a path or a ``file://`` URI); None for other schemes."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(location)
    return None


def make_artifact_paths_relative(tracking_uri: str) -> int:
    """Records a local store's artifact locations relative to its database's folder (``mlruns/...``); returns the
    runs rewritten. Locations in an ``mlruns`` folder elsewhere (a store moved or copied before this rule, or
    MLflow's absolute default) are pointed at the ``mlruns`` beside the database; other locations are left alone.
    MLflow has no API to change a location: the rows are rewritten in SQL, in one transaction."""
    db = store_database(tracking_uri)
    if db is None or not db.is_file():
        return 0
    updated = 0
    with sqlite3.connect(db, timeout=60) as con:
        try:
            rows = con.execute("SELECT experiment_id, artifact_location FROM experiments").fetchall()
        except sqlite3.DatabaseError:
            return 0  # not an MLflow store (yet)
        relative = []
        for experiment_id, location in rows:
            old = local_path(location) if isinstance(location, str) else None
            if old is not None and old.is_absolute() and old.name == ARTIFACT_FOLDER:
                con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                            (ARTIFACT_FOLDER, experiment_id))
                relative.append(experiment_id)
            elif location == ARTIFACT_FOLDER:
                relative.append(experiment_id)
        # a run's location is <experiment's>/<run id>/artifacts (MLflow's layout); one created while another
        # worker opened the store may still be absolute
        for experiment_id in relative:
            cur = con.execute("UPDATE runs SET artifact_uri = ? || '/' || run_uuid || '/artifacts' "
                              "WHERE experiment_id = ? AND artifact_uri != ? || '/' || run_uuid || '/artifacts' "
                              "AND artifact_uri LIKE '%/' || ? || '/' || run_uuid || '/artifacts'",
                              (ARTIFACT_FOLDER, experiment_id, ARTIFACT_FOLDER, ARTIFACT_FOLDER))
            updated += cur.rowcount
    return updated


def artifact_folder(tracking_uri: str, artifact_uri: str) -> str:
    """Where a run's artifacts are: a relative location resolved against the store's folder; others as given."""
    folder = store_folder(tracking_uri)
    path = local_path(artifact_uri)
    if folder is None or path is None or path.is_absolute():
        return artifact_uri
    return str(folder / path)
