"""Mistakes refused at once and in words (issue 34, items 5 and 9): a model of the other task, a grouped model
without --groups, a study that exists without --resume, a CUDA speed target where torch sees no CUDA -- each before
torch, Lightning and MLflow load and before any database is made --; `report --out` on a file, a --storage typo,
the companion study kept out of listings, the missing database driver named, `--help` that lists the models and
groups the flags by the settings table's sections, `enumerate` that says what it walked, and a final stage without
a finalist that does not call the baseline failed."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli, cli_here

from syno_automl.cli import build_parser
from syno_automl.settings import MODEL_NAMES, MODEL_TASKS, SECTIONS, SETTINGS, TRAINING_COMMANDS, section_of


def _refused(folder: Path, *args: str) -> str:
    """The one error line of `syno-automl search ARGS` in `folder`, checked to come before the heavy imports."""
    started = time.monotonic()
    done = cli(folder, "search", *args, check=False, timeout=120)
    seconds = time.monotonic() - started
    assert done.returncode == 1, (args, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("syno-automl: error: "), (args, done.stderr)
    assert "loading torch" not in done.stdout, (args, done.stdout)
    assert len(lines[0]) < 400, lines[0]    # one readable line, not a list of every layer
    assert seconds < 60, seconds            # a loaded 2-core machine: the imports alone take 11-13 s more
    return lines[0]


@pytest.mark.parametrize("args, words", [
    (("--model", "gpt"), ("--model gpt", "--task lm", "small_cnn")),
    (("--task", "lm", "--model", "small_cnn"), ("small_cnn", "image model", "gpt, gpt2")),
    (("--model", "resnext29_2x64d"), ("resnext29_2x64d", "grouped", "--groups")),
], ids=["lm-model-without-task-lm", "image-model-for-lm", "grouped-model-without-groups"])
def test_a_model_that_cannot_run_is_refused_before_the_imports(tmp_path, args, words) -> None:
    line = _refused(tmp_path, *args)
    assert all(w in line for w in words), line
    assert list(tmp_path.iterdir()) == []


def test_the_model_table_is_the_registries() -> None:
    from lightning_modules.models import LANGUAGE_MODEL_NAMES

    assert tuple(MODEL_TASKS) == MODEL_NAMES
    assert {m for m, t in MODEL_TASKS.items() if t == "lm"} == set(LANGUAGE_MODEL_NAMES)


def test_an_existing_study_without_resume_is_refused_before_the_imports(tmp_path) -> None:
    optuna.create_study(study_name="syno", storage=f"sqlite:///{tmp_path / 'syno.db'}")
    line = _refused(tmp_path)
    assert "study 'syno' already exists" in line and "--resume" in line and "--study NAME" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syno.db"]   # no mlflow.db: MLflow never started


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA: nothing to refuse")
def test_a_cuda_speed_target_without_cuda_is_refused_before_the_study(tmp_path) -> None:
    line = _refused(tmp_path, "--target", "cuda.eager")
    assert "--target cuda.eager" in line and "no CUDA device" in line and "cpu.eager" in line, line
    assert list(tmp_path.iterdir()) == []
    line = _refused(tmp_path, "--accelerator", "gpu")
    assert "--accelerator gpu" in line and "no GPU" in line, line


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA: nothing to skip")
def test_an_also_measure_cuda_target_without_cuda_is_a_warning_not_a_refusal() -> None:
    from syno_automl.runtime.device import check_runnable_here

    assert check_runnable_here("auto", "cpu.eager") == []   # nothing on CUDA: torch need not even be asked
    warnings = check_runnable_here("auto", "cpu.eager", ("cpu.compiled", "cuda.eager"))
    assert warnings == ["--also-measure cuda.eager: torch sees no CUDA device here; the final stage will skip it"]


def test_report_out_on_a_file_says_so(tmp_path) -> None:
    (tmp_path / "afile").write_text("")
    for out, named in (("afile", "it is a file"), ("afile/sub", "afile is a file")):
        done = cli_here(tmp_path, "report", "--out", out, check=False)
        assert done.returncode == 1 and f"--out {out}: {named}" in done.stderr, done.stderr
        assert "Errno" not in done.stderr and "report is a folder" in done.stderr


def test_a_missing_database_is_named_as_given(tmp_path) -> None:
    (tmp_path / "syno.db").write_bytes(b"")
    done = cli_here(tmp_path, "list", "--storage", "sqlite:///typo.db", check=False)
    line = done.stderr.strip()
    assert done.returncode == 1 and "--storage sqlite:///typo.db: no such file" in line, line
    assert "databases there: syno.db" in line and "or pass --storage" not in line, line
    (tmp_path / "syno.db").unlink()
    line = cli_here(tmp_path, "list", check=False).stderr.strip()   # the default: looked for in this folder
    assert "no study database syno.db in this folder" in line and "--storage URL" in line, line


def test_the_companion_study_is_not_listed(tmp_path) -> None:
    from syno_automl.study.storage import study_names

    url = f"sqlite:///{tmp_path / 'syno.db'}"
    for name in ("syno", "syno.fidelity", "mine.fidelity"):   # the last: a user's own, no search of that name
        optuna.create_study(study_name=name, storage=url)
    assert study_names(optuna.storages.RDBStorage(url)) == ["mine.fidelity", "syno"]
    line = cli_here(tmp_path, "list", "--study", "other", check=False).stderr
    assert "studies there: mine.fidelity, syno;" in line, line
    line = _refused(tmp_path, "--resume", "--study", "other")
    assert "studies there: mine.fidelity, syno)" in line, line


def test_a_missing_database_driver_is_named_with_its_package(monkeypatch) -> None:
    from syno_automl.errors import StorageURLError
    from syno_automl.study.storage import make_storage

    monkeypatch.setitem(sys.modules, "psycopg2", None)   # as if not installed
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StorageURLError, match=r"driver psycopg2, which is not installed: pip install psycopg2-binary"):
        make_storage("postgresql+psycopg2://user@127.0.0.1:1/db", heartbeat_interval=None)
    # SQLAlchemy 2.1's postgresql:// means psycopg (3)
    with pytest.raises(StorageURLError, match=r"driver psycopg, which is not installed: pip install 'psycopg\[binary"):
        make_storage("postgresql://user@127.0.0.1:1/db", heartbeat_interval=None)


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_help_lists_the_models_groups_the_flags_and_shows_training_flags_where_they_apply() -> None:
    search = _subparser("search")
    text = search.format_help()
    assert all(m in text for m in MODEL_NAMES) and "resnext29_2x64d with --groups" in text
    titles = [g.title for g in search._action_groups]
    assert [t for t in titles if t in dict(SECTIONS).values()] == [title for _, title in SECTIONS]
    for group in search._action_groups:   # each flag under its section's title
        for action in group._group_actions:
            setting = next((s for s in SETTINGS if s.flag in action.option_strings), None)
            if setting is not None:
                assert group.title == section_of(setting), (action.option_strings, group.title)
    training = [s.flag for s in SETTINGS if s.flag and s.commands == TRAINING_COMMANDS]
    assert {"--epochs", "--lr", "--steps", "--accelerator", "--precision"} <= set(training)
    for command in ("enumerate", "calibrate"):   # they train nothing
        flags = {o for a in _subparser(command)._actions for o in a.option_strings}
        assert not flags & set(training) and "--model" in flags, (command, flags & set(training))
    flags = {o for a in _subparser("reevaluate")._actions for o in a.option_strings}
    assert set(training) <= flags


def test_enumerate_walks_depth_by_depth_and_says_why_it_stopped() -> None:
    from syno_automl.cli.measure import _enumeration_line, enumerate_by_depth
    from syno_automl.space import OperatorSpace

    space = OperatorSpace("[N, C_in]", "[N, C_out]", primary=["N: 0", "C_in: 2", "C_out: 2"],
                          coefficients=["k=2: 1"], mappings=[{"N": 4, "C_in": 8, "C_out": 8}], max_depth=4)
    said: list[str] = []
    e, depth, whole = enumerate_by_depth(space, None, said.append)
    assert depth == 4 and whole is not None and whole[0] == 4 and e.stop_reason == "exhausted"
    assert [line.split(":")[0] for line in said] == [f"  depth <= {d}" for d in range(1, 5)]
    assert _enumeration_line(space, None, e, depth, whole).startswith(
        f"enumeration: {e.operator_count:,} operators, the whole space")

    class Walk:   # a space too large for the limit: whole to depth 3, the walk to depth 4 stopped by the time
        def __init__(self, depth: int) -> None:
            self.operator_count, self.nodes_per_depth, self.finals_per_depth = 10 * depth, [1] * depth, [0] * depth
            self.stop_reason, self.seconds = ("exhausted" if depth <= 3 else "time"), 0.5

    class Large:
        max_depth = 8

        def enumerate(self, max_depth: int, time_limit: float | None, max_operators: int) -> Walk:
            assert time_limit is not None and time_limit > 0 and max_operators == 0
            return Walk(max_depth)

    said.clear()
    e, depth, whole = enumerate_by_depth(Large(), 60.0, said.append)
    assert depth == 4 and whole is not None and whole[0] == 3 and len(said) == 4 and "partial" in said[-1]
    line = _enumeration_line(Large(), 60.0, e, depth, whole)
    assert line.startswith("enumeration: complete to depth 3: 30 operators of at most 3 primitives; depth 4 stopped "
                           "by the time limit after 0 s with 40 operators counted so far"), line
    assert "the space goes to depth 8" in line and "--time-limit" in line


def test_enumerate_prints_its_progress(tmp_path) -> None:
    out = cli_here(tmp_path, "enumerate", "--time-limit", "2").stdout   # in this process: the same lines, no imports
    assert "loading torch" in out.splitlines()[0] and "  depth <= 1: " in out
    assert "enumeration: " in out and "0 operators, stopped by time" not in out


def test_a_final_stage_without_a_finalist_does_not_call_the_baseline_failed() -> None:
    from syno_automl.study.verdict import Finalist, FinalResult

    base = Finalist("baseline", 0, "the original layers", 1.0, 0.936)
    result = FinalResult(base, [], seeds=3, epochs=2, margin=0.01, timing="not timed")
    assert base.figure() == "not re-trained"
    assert "failed" not in "\n".join(result.table()) + result.verdict()
    assert Finalist("x", 1, "", 0.5, 0.9, failures=["seed 0: ValueError: nan"]).figure() == "failed"
