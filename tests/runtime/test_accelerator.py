"""--accelerator, --devices and --precision reach every Trainer the package builds: an image trial, an lm trial,
the final stage's re-training and `reevaluate` all train through the task's Trainer; each is asserted on the
Trainer that path really built (recorded as Lightning constructs it). CPU only: bf16-mixed runs on a CPU too."""
from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest

from syno_automl.config import SearchConfig
from syno_automl.runtime import Device, SpeedTarget, resolve_device
from syno_automl.study import prepare
from syno_automl.study.context import resolve
from syno_automl.study.training import train_operator


def _record_trainers(monkeypatch: pytest.MonkeyPatch, **extra: object) -> list[L.Trainer]:
    built: list[L.Trainer] = []
    original = L.Trainer.__init__

    def recording(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - Lightning's own signature
        original(self, *args, **{**extra, **kwargs})
        built.append(self)

    monkeypatch.setattr(L.Trainer, "__init__", recording)
    return built


@pytest.fixture
def built_trainers(monkeypatch: pytest.MonkeyPatch) -> list[L.Trainer]:
    """Every Trainer constructed while the test runs."""
    return _record_trainers(monkeypatch)


@pytest.fixture
def brief_trainers(monkeypatch: pytest.MonkeyPatch) -> list[L.Trainer]:
    """Every Trainer constructed while the test runs, each training and validating on 2 batches an epoch (unless
    the package sets its own limits): what is checked is the Trainer built, not what it learns, and a bf16 step
    at batch 64 takes ~0.45 s on a CPU (a digits epoch, 23 steps, ~10 s)."""
    return _record_trainers(monkeypatch, limit_train_batches=2, limit_val_batches=2)


def _device_of(trainer: L.Trainer) -> tuple[str, str, int]:
    return type(trainer.accelerator).__name__, str(trainer.precision), trainer.num_devices


def test_the_options_are_lightnings_and_auto_finds_no_gpu_here():
    device = resolve_device("cpu", 1, "bf16-mixed")
    assert device.trainer_options() == {"accelerator": "cpu", "devices": 1, "precision": "bf16-mixed"}
    import torch

    auto = resolve(SearchConfig()).device
    assert auto.gpu == (torch.cuda.is_available() or torch.backends.mps.is_available())
    assert not device.gpu and auto.accelerator in ("cpu", "cuda", "mps")   # never "auto": Lightning gets ours


@pytest.mark.parametrize("cuda, mps, accelerator, device, speed", [
    (False, False, "auto", "cpu", "cpu.eager"),
    (True, False, "auto", "cuda", "cuda.compiled"),
    (False, True, "auto", "mps", "cpu.eager"),     # no MPS speed target: timed on the CPU, trained on the GPU
    (True, False, "gpu", "cuda", "cuda.compiled"),
    (False, True, "gpu", "mps", "cpu.eager"),
    (True, True, "cpu", "cpu", "cpu.eager"),
])
def test_auto_and_gpu_resolve_once_to_one_accelerator_and_its_speed_target(monkeypatch, cuda, mps, accelerator,
                                                                           device, speed):
    """One rule for "is this a GPU?": the trials' Trainer and the speed target read the same resolved Device (a
    machine with MPS once trained on it under Lightning's "auto" while the speed target said cpu.eager by a CUDA-only
    rule of its own)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    resolved = resolve(SearchConfig(accelerator=accelerator))
    assert resolved.device == Device(device, 1, "32")
    assert resolved.device.trainer_options()["accelerator"] == device
    assert resolved.speed.name == speed and isinstance(resolved.speed, SpeedTarget)


def test_the_speed_targets_are_parsed_once_the_verdicts_first_and_each_once():
    resolved = resolve(SearchConfig(accelerator="cpu", speed_target="cuda.eager",
                                    also_measure=("cpu.eager", "cuda.eager", "cpu.eager")))
    assert [t.name for t in resolved.speed_targets] == ["cuda.eager", "cpu.eager"]
    assert (resolved.budgets.flops, resolved.budgets.cost) == (0.5, 1.0)


def test_an_image_trial_trains_on_the_configured_device_and_precision(brief_trainers):
    context = prepare(SearchConfig(epochs=1, accelerator="cpu", precision="bf16-mixed", tracking_uri=None))
    value = train_operator(context, None, None, epochs=1, timeout=None)
    assert 0.0 <= value <= 1.0
    assert [_device_of(t) for t in brief_trainers] == [("CPUAccelerator", "bf16-mixed", 1)]
    assert not context.datamodule.pin_memory   # no GPU: nothing to pin for


def test_an_lm_trial_trains_on_the_configured_device_and_precision(built_trainers):
    context = prepare(SearchConfig(task="lm", seq_len=16, batch_size=8, val_every=2, val_batches=1, max_steps=2,
                                   accelerator="cpu", precision="bf16-mixed", tracking_uri=None))
    train_operator(context, None, None, epochs=1, steps=2, timeout=None)
    assert [_device_of(t) for t in built_trainers] == [("CPUAccelerator", "bf16-mixed", 1)]


def test_the_final_stage_and_reevaluate_train_on_the_study_device(tmp_path: Path, brief_trainers, monkeypatch):
    """A tiny search with its final stage, then `syno-automl reevaluate` of its baseline: every Trainer built on
    the way has the precision the search was given (recorded with the study, so reevaluate takes it too)."""
    import functools

    from _syno_helpers import brief_speed_protocol

    from syno_automl.cli import main
    from syno_automl.speed import sessions
    from syno_automl.study import finalists, run_search

    # the Trainers are what is checked, not the figures: the final stage's and reevaluate's timings (bf16 autocast
    # on a CPU, ~190 s of this test at the protocol's full length) brief, at a timing batch of 4 (a bf16 call at
    # the training's takes ~0.2 s here); a margin of 100 pp, so that the finalist is re-trained whatever its one
    # epoch gave it (the finalist rule skips one far outside the margin)
    brief = functools.partial(sessions.measure_final, protocol=brief_speed_protocol())
    monkeypatch.setattr(finalists, "measure_final", brief)
    monkeypatch.setattr(sessions, "measure_final", brief)
    storage = f"sqlite:///{tmp_path / 'syno.db'}"
    config = SearchConfig(trials=1, epochs=1, final_epochs=1, finalists=1, final_seeds=1, storage=storage,
                          tracking_uri=None, heartbeat=None, objective="accuracy", pruner="none", opening="known",
                          accelerator="cpu", precision="bf16-mixed", speed_batch=4, final_margin=1.0)
    result = run_search(config, out=None)
    assert result.study.user_attrs["syno.settings"]["precision"] == "bf16-mixed"
    searched = len(brief_trainers)
    assert searched >= 3   # baseline + one operator trial + the final stage's re-trainings
    monkeypatch.chdir(tmp_path)
    assert main(["reevaluate", "baseline", "--storage", storage, "--tracking-uri", "none", "--epochs", "1",
                 "--accelerator", "cpu", "--precision", "bf16-mixed", "--speed-batch", "4",
                 "-q"]) == 0
    assert len(brief_trainers) > searched
    assert {_device_of(t) for t in brief_trainers} == {("CPUAccelerator", "bf16-mixed", 1)}


def test_a_gpu_asked_for_where_torch_sees_none_is_refused_before_the_study(tmp_path: Path, monkeypatch):
    """It once created the study and failed every trial with Lightning's 'No supported gpu backend found!'."""
    import torch

    from syno_automl.settings import SettingError
    from syno_automl.study.run import run_search

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this CPU machine, on a GPU one too
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    storage = f"sqlite:///{tmp_path / 'syno.db'}"
    with pytest.raises(SettingError, match=r"--accelerator gpu: .* sees no GPU here"):
        run_search(SearchConfig(accelerator="gpu", epochs=1, trials=1, storage=storage, tracking_uri=None),
                   out=None)
    import optuna

    assert optuna.study.get_all_study_summaries(storage) == []


def test_several_devices_per_trial_are_refused_with_the_way_to_scale_out():
    """Lightning's DDP starts each further rank as a new copy of the running program: with --devices 2 on a CPU
    the whole search ran twice, the copy failing on the study the first had created."""
    from syno_automl.settings import SettingError

    with pytest.raises(SettingError, match=r"--devices must be 1, got 2: .*run 2 workers on one storage"):
        SearchConfig(devices=2).validate()
