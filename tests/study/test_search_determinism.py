"""Decisions independent of machine load (issue 10, item 4): the same seed gives the same trials on a quiet
machine and on a loaded one (operators in order, states, failed trials), with the planned speed objective
(``--speed-objective planned``: the documented way to a load-independent search). The loaded search shares one core
with a CPU hog that spins there (it gets half of the core, as beside a hog on every core), so the hog slows no other
test the way hogs on every core did (~35 s of CPU taken from the other test worker)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from _cli_helpers import cli_env, cli_here

# --speed-objective planned: the planned cost ratio is the speed objective, a deterministic prediction, so the MCTS
# decisions cannot depend on the load; the default (measured) times every trial, and its time ratios, and so the
# decisions they feed, move with the load by nature
SEARCH = ("search", "--trials", "2", "--epochs", "1", "--seed", "5", "--tracking-uri", "none", "--quiet",
          "--finalists", "0", "--speed-objective", "planned")  # the trials are compared; the final stage has its own


def _trials(cwd: Path) -> list[tuple]:
    storage = optuna.storages.RDBStorage(f"sqlite:///{cwd / 'syno.db'}", skip_table_creation=True,
                                         skip_compatibility_check=True)
    study = optuna.load_study(study_name="syno", storage=storage)
    def failure(t):
        return (t.user_attrs.get("syno.failure") or "").split(":")[0]  # the error type, not its figures
    return [(t.number, t.state.name, t.user_attrs.get("syno.hash"), failure(t), t.values) for t in study.trials]


def _hog(core: int) -> subprocess.Popen:
    """A process that spins on `core` until killed."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(hog.pid, {core})
    return hog


@pytest.mark.slow
def test_same_seed_same_trials_on_a_quiet_and_a_loaded_machine(tmp_path: Path) -> None:
    quiet, loaded = tmp_path / "quiet", tmp_path / "loaded"
    quiet.mkdir()
    loaded.mkdir()
    cli_here(quiet, *SEARCH)  # in this process; the loaded run in a process of its own, as a worker would be
    core = max(os.sched_getaffinity(0))
    search = subprocess.Popen([sys.executable, "-m", "syno_automl.cli", *SEARCH], cwd=loaded, env=cli_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    hog = None
    try:
        # the hog starts once the study is open (its database made): the search's imports, before any trial, run
        # unloaded (~8 s of CPU the hog would have shared for nothing); its decisions, trials and timings all loaded
        while not (loaded / "syno.db").exists() and search.poll() is None:
            time.sleep(0.05)
        hog = _hog(core)
        output, _ = search.communicate(timeout=600)
        assert search.returncode == 0, output
        assert hog.poll() is None, "the hog stopped before the loaded run ended"
    finally:
        for process in (search, hog):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    a, b = _trials(quiet), _trials(loaded)
    assert len(a) == 3 and a[0][2] is None   # the baseline, then 2 operator trials
    assert a == b


def test_relative_step_time_leaves_the_trained_model_untouched() -> None:
    import torch
    from torch import nn

    from syno_automl.search.time_limits import SlowTrialGuard, relative_step_time

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Flatten())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = (torch.randn(4, 1, 8, 8), torch.zeros(4))
    rng = torch.get_rng_state()
    ratio = relative_step_time(model, lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Flatten()), batch)
    assert ratio > 0
    assert torch.equal(torch.get_rng_state(), rng)   # dropout and init in the copies do not move the trial's RNG
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())   # BatchNorm statistics too
    with pytest.raises(ValueError, match="needs seconds"):
        SlowTrialGuard()


def test_the_example_batch_does_not_depend_on_the_global_rng() -> None:
    """The example batch sets every operator's initial scale: drawn from an unseeded shuffle, it differed in
    every process, and so did every trial's initial weights (and now and then its val_acc)."""
    import torch

    from syno_automl.config import SearchConfig
    from syno_automl.study import prepare

    examples = []
    for state in (1, 2):
        torch.manual_seed(state)
        examples.append(prepare(SearchConfig()).example)
    assert torch.equal(examples[0], examples[1])
