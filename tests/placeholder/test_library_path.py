"""docs/search.md's library path runs as written on an ordinary CNN (a 3-channel stem, then 32-channel convs, 16x16)
and on its Conv1d twin (issue 46, item 3: `nn.Conv1d` in the snippet's `substitute` call, the snippet's one word
that names the layer kind; the study ends with its trials complete, where trial 1 used to raise SearchExhaustedError);
substitute() refuses at once budgets that leave the space empty, naming the layer that makes it so; SynoSubstitution
makes a Substitution's choices again; a LightningModule without forward() is substituted in its model."""
from __future__ import annotations

import logging
import re
import threading
import time
import warnings
from pathlib import Path

import lightning as L
import optuna
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from syno_automl import EmptySpaceError, SubstitutionError, substitute
from syno_automl import vocabulary as V
from syno_automl.placeholder import Placeholder
from syno_automl.placeholder.empty_space import PROBE_ATTEMPTS
from syno_automl.search.callbacks import substituted_module

DOC = Path(__file__).resolve().parents[2] / "docs" / "search.md"


class MyNet(nn.Module):
    """An ordinary CNN: a stem reading the 3 image channels, then two 32-channel 3x3 convs."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.stem(x)))


class MyLightningModule(L.LightningModule):
    """No forward(): its steps call self.model, as many LightningModules do."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def training_step(self, batch: tuple, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def validation_step(self, batch: tuple, batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.model(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class MyNet1d(nn.Module):
    """MyNet for sequences: a stem reading 3 channels, then two 32-channel Conv1d's of kernel 3."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(3, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU())
        self.body = nn.Sequential(nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(),
                                  nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.stem(x)))


def _loaders(shape: tuple[int, ...] = (3, 16, 16)) -> tuple[DataLoader, DataLoader]:
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, *shape, generator=g), torch.randint(0, 10, (64,), generator=g))
    return DataLoader(data, batch_size=32, shuffle=True), DataLoader(data, batch_size=32)


def library_snippet() -> str:
    """The first Python block of docs/search.md's section "The library path"."""
    text = DOC.read_text()
    section = text[text.index("## The library path"):]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/search.md's library path has no python block"
    return found.group(1)


@pytest.mark.parametrize("net, layer, shape", [
    (MyNet, "nn.Conv2d", (3, 16, 16)),   # the snippet as written
    (MyNet1d, "nn.Conv1d", (3, 32)),     # its layer kind named 1-D: cost_ratio="auto" is 2.0 there
])
def test_the_library_path_runs_as_written(net: type[nn.Module], layer: str, shape: tuple[int, ...], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    code = library_snippet()
    for long, short in (("max_epochs=3", "max_epochs=1"), ("n_trials=20", "n_trials=2"),   # the only changes
                        ("substitute(model, nn.Conv2d,", f"substitute(model, {layer},")):
        assert code.count(long) == 1
        code = code.replace(long, short)
    monkeypatch.chdir(tmp_path)  # Lightning's default logger and checkpoints
    torch.manual_seed(0)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    train_loader, val_loader = _loaders(shape)
    namespace = {"MyNet": net, "MyLightningModule": MyLightningModule, "train_loader": train_loader,
                 "val_loader": val_loader}
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="syno_automl.search.sampler"):
        warnings.simplefilter("ignore")  # Lightning's advice on workers and loggers
        exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documented code, as written
    sub, study, best = namespace["sub"], namespace["study"], namespace["best"]
    _stop_prefetch(study)
    assert [name for name, _ in sub.placeholders] == ["body.0", "body.3"]  # the stem is kept
    assert sub.options["cost_ratio"] == (2.0 if layer == "nn.Conv1d" else 1.0)
    trials = study.get_trials()
    # every trial trained its operator (a space exhausted early would end the study with a pruned trial and the
    # sampler's "the study stops": not here, two operators are far from the space's end)
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), \
        [(t.state, t.user_attrs) for t in trials]
    assert "the study stops" not in caplog.text
    for t in trials:  # each trial replaced the layers sub chose (not the stem) with its operator
        assert t.user_attrs[V.BASELINE_FLOPS] == sub.baseline_flops
        assert t.user_attrs[V.FLOPS] < sub.baseline_flops
    assert best.space is sub.space


def _stop_prefetch(study: optuna.Study) -> None:
    """Ends the sampler's prefetch of the decision after the last (a daemon thread in the core's sampling): one still
    running when the interpreter exits aborts it ("terminate called without an active exception", status 134)."""
    stop = getattr(study.sampler, "_prefetch_stop", None)
    if stop is not None:
        stop.set()
    for thread in threading.enumerate():
        if thread.name == "syno-mcts-prefetch":
            thread.join(120)


def test_substitute_refuses_an_empty_space_at_once_naming_the_stem() -> None:
    model, x = MyNet(), torch.randn(64, 3, 16, 16)
    start = time.perf_counter()
    with pytest.raises(EmptySpaceError) as info:
        substitute(model, nn.Conv2d, x, flops_ratio=0.5)  # the stem too: nothing fits it and the others' budget
    seconds = time.perf_counter() - start
    message = str(info.value)
    assert "stem.0 (3 -> 32 channels, 16x16) shuts out the grouped conv2d (s groups)" in message
    assert "where=lambda name, m: name not in ('stem.0',)" in message and "check=False" in message
    assert "body.0" not in message
    assert seconds < 20  # one sample of at most CHECK_SECONDS_NAMED (2 s), not the first trial's whole sampling
    assert not any(isinstance(m, Placeholder) for m in model.modules())  # the model is left untouched
    # check=False gives the space as before (a trial's sampling then finds nothing)
    assert substitute(MyNet(), nn.Conv2d, x, flops_ratio=0.5, check=False).space.budgets["max_cost"] > 0


def test_a_space_with_a_grouped_form_is_not_sampled() -> None:
    x = torch.randn(64, 3, 16, 16)
    sub = substitute(MyNet(), nn.Conv2d, x, flops_ratio=0.5, where=lambda name, m: m.in_channels != 3)
    # the grouped conv witnesses an operator: no sample of the whole space ran, only the probe for an operator
    # beside the known forms (empty_space.KnownFormsOnlyWarning), which found one below the root's first choice
    report = getattr(sub.space, "last_report", None)
    assert report is not None and report.attempts <= PROBE_ATTEMPTS
    assert sub.options["flops_ratio"] == 0.5 and sub.layer_types == (nn.Conv2d,)


def test_a_module_without_forward_is_substituted_in_its_model() -> None:
    task = MyLightningModule(MyNet())
    assert substituted_module(task, nn.Conv2d) is task.model

    class TwoModels(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.generator, self.critic = MyNet(), MyNet()

    with pytest.raises(SubstitutionError, match=r"TwoModels has no forward\(\).*2 \(generator, critic\); define"):
        substituted_module(TwoModels(), nn.Conv2d)

    class WithForward(MyLightningModule):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

    with_forward = WithForward(MyNet())
    assert substituted_module(with_forward, nn.Conv2d) is with_forward
