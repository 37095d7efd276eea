"""Finding what a command names: a study's trial (number, best, baseline, hash prefix), the settings a --resume
takes from its study, and whether an MLflow tracking URI answers. Light: optuna and the study modules load lazily.

Example:
    >>> check_tracking_uri("sqlite:///mlflow.db")   # the current folder exists: nothing to say
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.errors import NotFoundError, OutputPathError, TrackingUnreachableError

__all__ = ["check_tracking_uri", "resume_defaults", "refuse_existing_study", "missing_database", "find_trial",
           "find_operator", "trial_header", "trial_line", "local_run_summary"]


def check_tracking_uri(uri: str, seconds: float = 3.0) -> None:
    """Fails in `seconds` with one line when an MLflow server does not answer, or a local store's folder is
    missing; MLflow's own client would retry for minutes. Creates nothing."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname or "localhost", port), timeout=seconds).close()
        except OSError as e:
            raise TrackingUnreachableError(f"MLflow tracking server {uri} is unreachable ({e.strerror or e}): start it "
                                  f"(mlflow server --host {parsed.hostname} --port {port}) or pass --tracking-uri "
                                  f"none") from None
        # once reachable, a server that goes away later fails a call in seconds, not after minutes of retries
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    elif parsed.scheme == "sqlite" and uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///"):]).parent
        if not folder.is_dir():
            raise OutputPathError(f"--tracking-uri {uri}: folder {folder} does not exist")
        from syno_automl.cli.preflight import check_database

        check_database(uri, "--tracking-uri")   # a damaged store named, before MLflow's message that names none


# CLI option -> the setting a study records (SearchConfig.settings()): what --resume takes from the study
def existing_storage(url: str, missing: Callable[[str], Exception]) -> Any:
    """The Optuna storage at `url`, opened without creating anything: a SQLite file that does not exist raises
    ``missing(path)`` instead of being created empty (reading commands and --resume must not leave a syno.db)."""
    from syno_automl.cli.preflight import check_database
    from syno_automl.study.storage import make_storage

    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise missing(url[len("sqlite:///"):])
    check_database(url, "--storage")   # a damaged file named, before SQLAlchemy's message that names none
    return make_storage(url, heartbeat_interval=None)


def refuse_existing_study(url: str, study: str) -> None:
    """StudyExistsError when a new search names a study that `url`'s storage already holds: said before the heavy
    imports (run_search would say it after them). Creates nothing: a database file that does not exist holds no
    study and is not opened."""
    path = None   # a server's database: asked
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
    else:   # (study.storage loads Optuna: not for the common SQLite file)
        from syno_automl.study.storage import is_journal

        if is_journal(url):
            path = url[len("journal:"):] if url.startswith("journal:") else url
    if path is not None and not Path(path).is_file():
        return
    import optuna

    from syno_automl.config import StudyExistsError

    storage = existing_storage(url, lambda path: FileNotFoundError(path))
    if study in optuna.get_all_study_names(storage):
        raise StudyExistsError(f"study {study!r} already exists in {url}: pass --resume to continue it, or --study "
                               f"NAME for a new one")


def missing_database(url: str, path: str, default: bool) -> str:
    """What a reading command says when the SQLite file of --storage `url` does not exist: `default`, the storage
    no --storage was given for, is looked for in this folder; a given one is named with the databases beside it."""
    where = Path(path).resolve()
    if default:
        return (f"no study database {path} in this folder ({where.parent}): run `syno-automl search` here first, or "
                f"pass --storage URL")
    if not where.parent.is_dir():
        return f"--storage {url}: no such file {where} (its folder does not exist)"
    beside = sorted(p.name for p in where.parent.glob("*.db"))
    there = f"databases there: {', '.join(beside)}" if beside else "no .db file there"
    return f"--storage {url}: no such file {where} ({there})"


def resume_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """Options not given on a --resume take the study's recorded settings (the study is read, not created);
    returns those settings."""
    import optuna

    url = args.storage
    storage = existing_storage(url, lambda path: LookupError(
        f"no study {args.study!r} to resume: {path} does not exist (drop --resume to start one)"))
    try:
        recorded = optuna.load_study(study_name=args.study, storage=storage).user_attrs.get(V.SETTINGS, {})
    except KeyError:
        from syno_automl.study.storage import study_names

        names = ", ".join(study_names(storage)) or "none"   # not a pareto search's companion (<study>.fidelity)
        raise NotFoundError(f"no study {args.study!r} to resume in {url} (studies there: {names}); drop --resume "
                          f"to start it") from None
    from syno_automl.config import with_legacy_settings

    if isinstance(recorded, dict):  # a study recorded before --objective / --pruner: single-objective, unpruned
        recorded = with_legacy_settings(recorded)
    recorded = recorded if isinstance(recorded, dict) else {}
    from syno_automl.cli.options import fill_from_recorded

    fill_from_recorded(args, recorded)
    return recorded



def find_trial(study: Any, ref: str) -> Any:
    """The trial `ref` names: ``best`` (the search's best operator), ``final`` (the operator the final stage names),
    ``baseline``, a trial number, or an operator hash prefix. Digits are a trial number when shorter than 4
    characters; a longer run of digits that is both a trial number and a hash prefix is refused as ambiguous (give
    more of the hash, or ``#N``)."""
    from syno_automl.search.objectives import baseline_trial, best_operator_trial

    trials = study.get_trials(deepcopy=False)
    key = ref.strip().lower()
    if key == "best":
        found = best_operator_trial(study)
        if found is None:
            raise NotFoundError(f"study {study.study_name!r} has no completed operator trial yet")
        return found
    if key == "final":
        from syno_automl.study.verdict import stored_final

        final = stored_final(study)
        chosen = final.chosen if final is not None else None
        if final is None:
            raise NotFoundError(f"study {study.study_name!r} has no final stage "
                                f"(`syno-automl search --resume --finalists K` runs it)")
        if chosen is None or chosen.trial is None:
            raise NotFoundError(f"the final stage of study {study.study_name!r} names no operator: {final.verdict()}")
        return next(t for t in trials if t.number == chosen.trial)
    if key == "baseline":
        found = baseline_trial(study) or next((t for t in trials if t.user_attrs.get(V.BASELINE)), None)
        if found is None:
            raise NotFoundError(f"study {study.study_name!r} has no baseline trial")
        return found
    number = int(key[1:]) if key.startswith("#") and key[1:].isdigit() else (int(key) if key.isdigit() else None)
    by_number = next((t for t in trials if t.number == number), None) if number is not None else None
    if key.startswith("#") or (by_number is not None and len(key) < 4):
        if by_number is None:
            raise NotFoundError(f"no trial {number} in study {study.study_name!r} ({len(trials)} trials)")
        return by_number
    matches: dict[str, Any] = {}
    for t in trials:
        h = t.user_attrs.get(V.HASH)
        if isinstance(h, str) and h.startswith(key):
            best = matches.get(h)  # a retried operator: its completed trial
            if best is None or (t.state.name == "COMPLETE" and best.state.name != "COMPLETE"):
                matches[h] = t
    if by_number is not None and matches:
        raise NotFoundError(f"{ref!r} is both trial {number} and a hash prefix of {', '.join(sorted(matches))}: "
                          f"write #{number} for the trial, or more of the hash")
    if by_number is not None:
        return by_number
    if not matches:
        raise NotFoundError(f"no trial or operator {ref!r} in study {study.study_name!r} (see `syno-automl show`)")
    if len(matches) > 1:
        raise NotFoundError(f"hash prefix {ref!r} is ambiguous: {', '.join(sorted(matches))}")
    return next(iter(matches.values()))


def find_operator(study: Any, ref: str, space_of: Callable[[Any], Any]) -> tuple[Any, Any]:
    """(trial, Operator) for `ref` (see find_trial); the baseline has no operator. `space_of(study)`: its space."""
    from syno_automl.search.sampler import operator_json_of
    from syno_automl.space import Operator

    trial = find_trial(study, ref)
    text = operator_json_of(trial)
    if trial.user_attrs.get(V.BASELINE) or text is None:
        raise NotFoundError(f"trial {trial.number} " + ("trains the baseline (the original layers): it has no operator"
                                                      if trial.user_attrs.get(V.BASELINE) else "has no operator"))
    return trial, Operator.from_json(space_of(study), text)


def trial_header(name: str, final: Any | None = None) -> str:
    """The column titles of :func:`trial_line` (`final`: the study's FinalResult, which adds its column)."""
    retrained = f"  {'final ' + str(final.seeds) + ' seeds':<16}" if final is not None else ""
    return f"{'trial':>5}  {'state':<8}  {'operator':<16}  {name:>8}{retrained}  {'FLOPs':>7}  {'cost':>7}  reason"


def trial_line(trial: Any, name: str, final: Any | None = None, stale: bool = False, note: str | None = None) -> str:
    """One row of `syno-automl show`: number, state, operator, objective value in the search, the re-trained mean ±
    sd of a finalist (`final`: the study's FinalResult; ``*`` marks the operator it names), FLOPs and cost
    ratios, reason (`stale`: a RUNNING trial whose worker is gone, study.lost_trials.stale_trials, says so; `note`
    first: which trial retries it, study.requeue.retry_note)."""
    from syno_automl.search.objectives import cost_of, primary_value

    state = trial.state.name
    label = "baseline" if trial.user_attrs.get(V.BASELINE) else str(trial.user_attrs.get(V.HASH, "-"))
    found = primary_value(trial)
    value = f"{found:.4f}" if found is not None else "-"
    retrained = ""
    if final is not None:
        mine = final.of_trial(trial.number)
        figure = "-" if mine is None else mine.figure() + (" *" if mine is final.chosen else "")
        retrained = f"  {figure:<16}"
    ratio = trial.user_attrs.get(V.FLOPS_RATIO)
    flops = f"{ratio:.3f}x" if isinstance(ratio, (int, float)) else "-"
    cost_ratio = cost_of(trial)
    cost = f"{cost_ratio:.3f}x" if isinstance(cost_ratio, (int, float)) else "-"
    why = trial.user_attrs.get(V.FAILURE) or trial.user_attrs.get(V.PRUNED) or ""
    if stale:
        from syno_automl.study.lost_trials import STALE

        why = STALE
    if note:
        why = f"{note}: {why}" if why else note
    return (f"{trial.number:>5}  {state:<8}  {label:<16}  {value:>8}{retrained}  {flops:>7}  {cost:>7}  "
            f"{str(why)[:60]}").rstrip()


def local_run_summary(tracking_uri: str, run_id: str) -> tuple[str, list[str]] | None:
    """(status, top-level artifact names) of an MLflow run, read straight from a local ``sqlite:///`` store and the
    ``mlruns`` folder beside it, without MLflow (whose import takes seconds and ~200 MB). None when this cannot
    answer for sure -- a server, another artifact location (MLflow's client answers then)."""
    import sqlite3

    from syno_automl.tracking.store import ARTIFACT_FOLDER, artifact_folder, local_path, store_database

    db = store_database(tracking_uri)
    if db is None or not db.is_file():
        return None
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10) as con:
            row = con.execute("SELECT status, artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    except sqlite3.Error:
        return None
    if row is None or not isinstance(row[1], str):
        return None
    status, uri = row
    folder = local_path(artifact_folder(tracking_uri, uri))  # a relative location is the store folder's
    if folder is None:
        return None
    here = db.parent / ARTIFACT_FOLDER
    if not folder.is_dir() or here not in folder.resolve().parents:
        return None
    return str(status), sorted(p.name for p in folder.iterdir())
