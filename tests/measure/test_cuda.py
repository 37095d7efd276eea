"""CUDA checks: generated modules, TVM CUDA kernels, CUDA latency and GPU training.

These need a CUDA device; without one each test is skipped with that reason (CI has none). They were run on a
lent H100 with ``scripts/gpu_checks.sh``. TF32 is switched off so that fp32 results compare at 1e-4.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from syno_automl import OperatorSpace, known

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

SPECS = {
    "conv2d": ("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
               ["k=3: 2", "s=2: 2"], {"N": 2, "C_in": 8, "C_out": 8, "H": 8, "W": 8}, {}),
    "matmul": ("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], ["s=2: 2"],
               {"N": 4, "C_in": 16, "C_out": 8}, {"max_depth": 5}),
    "conv1d": ("[N, C, L]", "[N, C, L]", ["N: 0", "C: 2", "L: 2"], ["k=3: 2", "s=2: 2"],
               {"N": 2, "C": 8, "L": 16}, {}),
}


def _space(name: str) -> OperatorSpace:
    inp, out, primary, coefficients, mapping, options = SPECS[name]
    return OperatorSpace(inp, out, primary, coefficients, [mapping], **{"max_depth": 7, **options})


@pytest.fixture(autouse=True)
def exact_fp32():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@cuda
@pytest.mark.parametrize("name", sorted(SPECS))
def test_generated_module_on_cuda_matches_cpu(name: str) -> None:
    """Forward and input/weight gradients of 20 sampled operators per spec: CUDA fp32 == CPU fp64."""
    for op in _space(name).sample(20, seed=5):
        cpu = op.to_module().double()
        gpu = op.to_module().cuda()
        gpu.load_state_dict({k: v.float() for k, v in cpu.state_dict().items()})
        x = torch.randn(op.program()["input"]["shape"], dtype=torch.float64, requires_grad=True)
        xg = x.detach().float().cuda().requires_grad_()
        y, yg = cpu(x), gpu(xg)
        scale = 1.0 + y.abs().max().item()
        torch.testing.assert_close(yg.double().cpu(), y.detach(), rtol=1e-4, atol=1e-4 * scale,
                                   msg=lambda m, op=op: f"{op.hash}: {m}")
        g = torch.randn_like(y)
        y.backward(g)
        yg.backward(g.float().cuda())
        torch.testing.assert_close(xg.grad.double().cpu(), x.grad, rtol=1e-3, atol=1e-3 * (1 + x.grad.abs().max()))
        for (n, p), pg in zip(cpu.named_parameters(), gpu.parameters()):
            torch.testing.assert_close(pg.grad.double().cpu(), p.grad, rtol=1e-3, atol=1e-3 * (1 + p.grad.abs().max()),
                                       msg=lambda m, op=op, n=n: f"{op.hash} {n}: {m}")


def _tvm_cuda():
    tvm = pytest.importorskip("tvm")
    if not tvm.cuda(0).exist:
        pytest.skip("TVM sees no CUDA device")
    return tvm


@cuda
@pytest.mark.tvm
@pytest.mark.parametrize("name", sorted(SPECS))
def test_tvm_cuda_kernel_equals_torch_module(name: str) -> None:
    """TVM kernels built for ``cuda`` (DLight default schedules) agree with the PyTorch modules."""
    _tvm_cuda()
    rng = np.random.default_rng(1)
    for op in _space(name).sample(12, seed=9):
        module = op.to_module().double()
        x = rng.standard_normal(op.program()["input"]["shape"])
        weights = [p.detach().numpy().astype(np.float32) for p in module.parameters()]
        expected = module(torch.from_numpy(x)).detach().numpy()
        got = op.to_tvm(target="cuda")(x.astype(np.float32), *weights)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * (1 + np.abs(expected).max()),
                                   err_msg=f"operator {op.hash}:\n{op}")


@cuda
@pytest.mark.tvm
def test_cuda_latency_tuned_and_inductor(tmp_path) -> None:
    """Every CUDA figure is there: TVM default schedule, a few MetaSchedule trials, and TorchInductor."""
    _tvm_cuda()
    from syno_automl import measure as lat

    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2", "g=4: 2"], [{"N": 1, "C_in": 32, "C_out": 32, "H": 14, "W": 14}])
    op = known.grouped_conv2d(space)
    quick = lat.TimingProtocol(warmup=1, number=3, repeat=5, min_repeat_ms=5)
    for trials in (0, 4):
        m = lat.measure_operator(op, 0, lat.MeasureRequest(targets=("cuda",), trials=trials, protocol=quick,
                                                           inductor=trials == 0, work_dir=str(tmp_path)))
        assert m["notes"] == {}, m["notes"]
        assert m["latency_ms.cuda"] > 0 and m["speedup.cuda"] > 0
        if trials == 0:
            assert m["latency_ms.inductor-cuda"] > 0 and m["speedup.inductor-cuda"] > 0


@cuda
def test_training_on_gpu_reduces_loss() -> None:
    """A Lightning Trainer on the GPU trains a small CNN whose 3x3 convolutions are the conv2d-equivalent
    Syno operator (on the CPU the same run takes the loss from 2.30 to 1.61)."""
    import lightning as L

    torch.manual_seed(0)
    dm, model, sub = _digits_cnn()
    sub.apply(known.conv2d(sub.space))
    from lightning_modules.learners import ImageClassifier

    task = ImageClassifier(model, num_classes=10, lr=0.05)
    before = _mean_loss(task, dm)
    devices = set()

    class RecordDevice(L.Callback):
        def on_train_batch_end(self, trainer, module, *args) -> None:
            devices.update(p.device.type for p in module.parameters())

    trainer = L.Trainer(max_epochs=3, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[RecordDevice()])
    trainer.fit(task, datamodule=dm)
    assert devices == {"cuda"}  # every parameter, the operator's included, trained on the GPU
    after = _mean_loss(task.cpu(), dm)  # Lightning moves the module back to the CPU after fit
    assert after < 0.8 * before, (before, after)


@cuda
def test_trial_callbacks_on_gpu() -> None:
    """What a search trial adds on a GPU: SynoSubstitution given a CPU example (the search's), and SlowTrialGuard
    timing the trained model against a baseline factory that builds on the CPU. Both failed every trial of the
    first search on an H200 (input on CUDA, weights on the CPU)."""
    import lightning as L
    from torch import nn

    from lightning_modules import build_model
    from lightning_modules.learners import ImageClassifier
    from syno_automl.search.callbacks import SynoSubstitution
    from syno_automl.search.time_limits import SlowTrialGuard

    torch.manual_seed(0)
    dm, _, sub = _digits_cnn()
    op = sub.space.sample(1, seed=0)[0]
    x = next(iter(dm.train_dataloader()))[0]
    substitution = SynoSubstitution(op, layer=nn.Conv2d, example_input=x, flops_ratio=1.0, max_depth=8,
                                    where=lambda n, m: m.in_channels != 1)
    guard = SlowTrialGuard(600, baseline=lambda: build_model("small_cnn", 10, 1), probe_steps=2)
    trainer = L.Trainer(max_epochs=1, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_train_batches=4,
                        limit_val_batches=2, callbacks=[substitution, guard])
    trainer.fit(ImageClassifier(build_model("small_cnn", 10, 1), num_classes=10), datamodule=dm)
    assert guard.slowdown is not None and guard.slowdown > 0
    assert "val_acc" in trainer.callback_metrics


@cuda
def test_sampled_operators_train_the_same_on_gpu_and_cpu() -> None:
    """Eight SGD steps of a small CNN with a sampled operator in its convolutions, from the same weights on the
    same batches: the losses on the GPU follow the CPU's (whether an operator learns fast is its own business)."""
    import copy

    torch.manual_seed(0)
    dm, model, sub = _digits_cnn()
    batches = [b for _, b in zip(range(8), dm.train_dataloader())]
    for op in sub.space.sample(3, seed=0):
        sub.apply(op)
        losses = {}
        for device in ("cpu", "cuda"):
            net = copy.deepcopy(model).to(device)
            opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
            losses[device] = []
            for x, y in batches:
                loss = torch.nn.functional.cross_entropy(net(x.to(device)), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses[device].append(loss.item())
        np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=2e-3, err_msg=op.hash)


def _digits_cnn():
    from torch import nn

    from lightning_modules import DigitsDataModule, build_model
    from syno_automl.placeholder import substitute

    dm = DigitsDataModule(image_size=16, batch_size=64)
    dm.setup("fit")
    model = build_model("small_cnn", 10, 1)
    x = next(iter(dm.train_dataloader()))[0]
    sub = substitute(model, nn.Conv2d, x, where=lambda n, m: m.in_channels != 1, flops_ratio=1.0, max_depth=8,
                     cost_ratio=None)
    return dm, model, sub


def _mean_loss(task, dm) -> float:
    task.eval()
    with torch.no_grad():
        losses = [torch.nn.functional.cross_entropy(task(x), y).item() for x, y in dm.val_dataloader()]
    task.train()
    return float(np.mean(losses))
