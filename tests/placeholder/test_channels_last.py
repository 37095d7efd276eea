"""Substituted models are channels-last safe (issue 45, item 3): ``model.to(memory_format=torch.channels_last)``,
the usual first step on a GPU, works on every substituted model, and the model so moved computes what the contiguous
one computes, forward and backward, on a contiguous and on a channels-last input (CPU, fp32).

Operators: samples of the default search's space (the small CNN with a pointwise stem on 8x8 digits, its grouped
conv ``ad6c0141110ce7ad`` among them: a 5-D weight, which channels-last used to refuse) and of a ResNet-like conv
space without budgets (two 3x3 convs 16 and 32 wide), which together hold every step kind of the IR and operators
with a product of weights."""
from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import nn

from syno_automl import known
from syno_automl.placeholder import Substitution, substitute

STEP_KINDS = {"split", "merge", "shift", "stride", "unfold", "expand", "reduce", "contract"}
GROUPED_CONV = "ad6c0141110ce7ad"  # the default space's grouped conv with s = 2 groups (weight [2, 32, 32, 3, 3])


@functools.cache
def _default() -> tuple[Substitution, torch.Tensor]:
    """The default search's model and space (``pointwise_cnn`` on digits at 8x8, FLOPs budget 0.5x, the cost
    budget and the priors on), at batch 2."""
    from lightning_modules import build_model

    torch.manual_seed(0)
    x = torch.randn(2, 1, 8, 8)
    return substitute(build_model("pointwise_cnn", 10, 1), nn.Conv2d, x, flops_ratio=0.5, seed=0), x


class _ResNetLike(nn.Module):
    """A 1x1 stem and two 3x3 conv + batch norm + ReLU stages with a residual add, 16 then 32 wide."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 1)
        self.conv1, self.bn1 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.bn1(self.conv1(x)) + x)
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean((2, 3)))


@functools.cache
def _resnet_like() -> tuple[Substitution, torch.Tensor]:
    """The two 3x3 convs of ``_ResNetLike`` substituted, at 8x8, batch 2, no FLOPs or cost budget and up to two
    EXPANDs (none by default), so that operators with several weights and every step kind are drawn."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    return substitute(_ResNetLike(), nn.Conv2d, x, flops_ratio=None, cost_ratio=None, seed=0,
                      max_counts={"EXPAND": 2}), x


def _ops(space_of, count: int, seed: int):
    sub, x = space_of()
    return sub, x, sub.space.sample(count, seed=seed)


def _step_kinds(op) -> set[str]:
    return {step["op"] for m in range(len(op.space.mappings)) for step in op.program(m)["steps"]}


def _grads(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """(output, every parameter's gradient, the input's gradient) of a loss that weighs each output differently."""
    x = x.detach().clone().requires_grad_(True)
    model.zero_grad(set_to_none=True)
    out = model(x)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).reshape(out.shape)
    (out * weights).sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert x.grad is not None
    return out.detach(), grads, x.grad


def _assert_channels_last_agrees(sub: Substitution, x: torch.Tensor, op) -> None:
    sub.apply(op)
    try:
        torch.manual_seed(1)
        for ph in sub.placeholders:  # a nonzero bias, so that the bias's broadcast is checked too
            if ph[1].bias is not None:
                nn.init.uniform_(ph[1].bias, -0.5, 0.5)
        model = copy.deepcopy(sub.model).eval()
        moved = copy.deepcopy(model).to(memory_format=torch.channels_last)
        four_d = [p for p in moved.parameters() if p.dim() == 4]
        assert all(p.is_contiguous(memory_format=torch.channels_last) for p in four_d)
        out, grads, gx = _grads(model, x)
        for given in (x, x.contiguous(memory_format=torch.channels_last)):
            got, got_grads, got_gx = _grads(moved, given)
            torch.testing.assert_close(got, out, rtol=1e-5, atol=1e-5, msg=lambda m: f"{op.hash} forward: {m}")
            assert got_grads.keys() == grads.keys()
            for name, g in grads.items():
                torch.testing.assert_close(got_grads[name], g, rtol=1e-4, atol=1e-5,
                                           msg=lambda m, name=name: f"{op.hash} grad of {name}: {m}")
            torch.testing.assert_close(got_gx, gx, rtol=1e-4, atol=1e-5, msg=lambda m: f"{op.hash} input grad: {m}")
    finally:
        sub.restore()


def test_the_grouped_conv_with_a_5d_weight_moves_to_channels_last():
    sub, x = _default()
    op = known.grouped_conv2d(sub.space, "s")
    assert op.hash == GROUPED_CONV
    sub.apply(op)
    try:
        ranks = {p.dim() for ph in sub.placeholders for p in ph[1].operator.parameters()}
        assert ranks == {5}
        model = copy.deepcopy(sub.model).to(memory_format=torch.channels_last)  # raised "required rank 4 tensor"
        state = model.state_dict()
        assert {k: tuple(v.shape) for k, v in state.items()} == {
            k: tuple(v.shape) for k, v in sub.model.state_dict().items()}  # shapes and keys kept: export loads them
        assert model(x.contiguous(memory_format=torch.channels_last)).shape == sub.model(x).shape
    finally:
        sub.restore()


def test_a_5d_weight_still_changes_device_and_dtype():
    """The 5-D weight goes through ``Module.to`` as a 6-D view: its dtype changes, its shape and layout stay."""
    sub, _ = _default()
    sub.apply(known.grouped_conv2d(sub.space, "s"))
    try:
        model = copy.deepcopy(sub.model).to(torch.float64, memory_format=torch.channels_last)
        weights = [p for ph_name, _ in sub.placeholders for p in model.get_submodule(ph_name).operator.parameters()]
        assert weights and all(w.dtype == torch.float64 and w.dim() == 5 and w.is_contiguous() for w in weights)
    finally:
        sub.restore()


@pytest.mark.parametrize("space_of, count, seed", [(_default, 24, 0), (_resnet_like, 40, 0)],
                         ids=["default-space", "resnet-like"])
def test_channels_last_gives_the_same_forward_and_gradients(space_of, count, seed):
    sub, x, ops = _ops(space_of, count, seed)
    extra = [known.conv2d(sub.space), known.grouped_conv2d(sub.space, "s")] if space_of is _resnet_like else [
        known.grouped_conv2d(sub.space, "s")]
    for op in ops + extra:
        _assert_channels_last_agrees(sub, x, op)


def test_the_samples_cover_every_step_kind_and_products_of_weights():
    """The operators the test above checks hold every step kind of the IR, and some several weights."""
    kinds: set[str] = set()
    products = 0
    for space_of, count, seed in [(_default, 24, 0), (_resnet_like, 40, 0)]:
        _, _, ops = _ops(space_of, count, seed)
        for op in ops:
            kinds |= _step_kinds(op)
            products += len(op.program(0)["weights"]) > 1
    assert kinds >= STEP_KINDS, STEP_KINDS - kinds
    assert products >= 5
