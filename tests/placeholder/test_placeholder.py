"""Placeholder and automatic substitution (syno_automl.placeholder) on the model zoo.

Covers: which layers are substituted or skipped (with reasons) in every model of lightning_modules; after
``sub.apply(op)`` with a sampled operator each model runs, works for any batch size and trains one SGD step on a
fixed batch with the loss going down; ``restore()`` gives back identical outputs and state; the conv- and
linear-equivalent operators with copied weights reproduce the original models exactly; FLOPs budgets; the seed
README's hand-placed placeholders; clear errors.
"""
from __future__ import annotations

import copy
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from lightning_modules.models import build_model
from syno_automl import known
from syno_automl.errors import OperatorFormatError, SubstitutionError
from syno_automl.placeholder import Placeholder, Substitution, install, placeholders, space_for, substitute

STRIDE = "stride (2, 2) != 1"
ONE_BY_ONE = "kernel 1x1 not in kernel_sizes=(3,)"




def image_batch(size: int = 16, batch: int = 2):
    gen = torch.Generator().manual_seed(0)
    return torch.randn(batch, 3, size, size, generator=gen), torch.arange(batch) % 10


def token_batch(vocab: int = 64, batch: int = 2, steps: int = 8):
    gen = torch.Generator().manual_seed(0)
    return (torch.randint(0, vocab, (batch, steps), generator=gen),
            torch.randint(0, vocab, (batch, steps), generator=gen))


def model_and_batch(name: str):
    torch.manual_seed(0)
    if name == "gpt":
        return build_model("gpt", num_classes=64), *token_batch()
    return build_model(name, num_classes=10, in_channels=3), *image_batch()


def loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(0)  # stochastic depth (EfficientNet) draws the same masks every call
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def sgd_step_lowers_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float = 0.01) -> tuple[float, float]:
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    before = loss_of(model, x, y)
    assert torch.isfinite(before)
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss_of(model, x, y)
    return before.item(), after.item()


def reasons(sub: Substitution) -> Counter:
    return Counter(reason for _, reason in sub.skipped)


# --------------------------------------------------------------------------------------------------------
# which layers are substituted
# --------------------------------------------------------------------------------------------------------

GROUPED = "groups=2 (grouped; pass groups=True to substitute grouped convolutions)"

COUNTS = [
    # model, kwargs, substituted, skipped reasons
    ("small_cnn", {}, 3, {}),
    ("resnet18", {}, 14, {STRIDE: 6}),
    ("resnet34", {}, 30, {STRIDE: 6}),
    ("resnext29_2x64d", {}, 1, {ONE_BY_ONE: 19, GROUPED: 7, STRIDE: 4}),
    ("resnext29_2x64d", {"groups": True}, 8, {ONE_BY_ONE: 19, STRIDE: 4}),
    ("densenet121", {}, 59, {ONE_BY_ONE: 61}),
    ("densenet121", {"kernel_sizes": None}, 120, {}),
]


@pytest.mark.parametrize("name, kwargs, substituted, skipped", COUNTS,
                         ids=[f"{c[0]}{'-' + '-'.join(c[1]) if c[1] else ''}" for c in COUNTS])
def test_conv_counts(name, kwargs, substituted, skipped):
    model, x, _ = model_and_batch(name)
    sub = substitute(model, nn.Conv2d, x, **kwargs, cost_ratio=None)
    assert len(sub.placeholders) == substituted
    assert dict(reasons(sub)) == skipped
    total = sum(isinstance(m, nn.Conv2d) for m in model.modules())  # placeholders hold their original layer
    assert total == substituted + len(sub.skipped)
    assert sub.space.num_mappings == substituted
    for (name_, p), m in zip(sub.placeholders, sub.mappings):
        assert isinstance(p, Placeholder) and p.mapping == m
        layer = p.referred_layer
        assert isinstance(layer, nn.Conv2d) and layer.stride == (1, 1)
        assert m["C_in"] == layer.in_channels and m["C_out"] == layer.out_channels and m["N"] == x.shape[0]
        assert p.input_shape == (m["N"], m["C_in"], m["H"], m["W"]) and p.output_shape[1] == m["C_out"]
        assert model.get_submodule(name_) is p


def test_conv_counts_efficientnet():
    model, x, _ = model_and_batch("efficientnet_v2_s")
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None)
    r = reasons(sub)
    assert len(sub.placeholders) == 9
    assert r[ONE_BY_ONE] == 129 and r[STRIDE] == 4
    depthwise = [reason for reason in r if "depthwise" in reason]
    assert sum(r[k] for k in depthwise) == 28
    sub.restore()
    sub = substitute(model, nn.Conv2d, x, groups=True, cost_ratio=None)
    assert len(sub.placeholders) == 9 + 28
    assert dict(reasons(sub)) == {ONE_BY_ONE: 129, STRIDE: 4}


def test_gpt_qkv_and_all_linears():
    model, x, _ = model_and_batch("gpt")
    sub = substitute(model, nn.Linear, x, where="*.qkv", cost_ratio=None)
    assert [n for n, _ in sub.placeholders] == ["blocks.0.attn.qkv", "blocks.1.attn.qkv"]
    assert dict(reasons(sub)) == {"excluded by where": 7}
    # [B, T, d] -> [B, T, 3d] as [N, C_in] -> [N, C_out] with N = B * T
    assert sub.mappings == [{"N": 2 * 8, "C_in": 64, "C_out": 192}] * 2
    assert sub.baseline_flops == 2 * (2 * 2 * 8 * 64 * 192)
    sub.restore()

    sub = substitute(model, nn.Linear, x, cost_ratio=None)
    assert len(sub.placeholders) == 8  # qkv, attn.proj, mlp.fc, mlp.proj per block
    assert sub.skipped == [("lm_head", "weight shared with token_embedding (tied weights)")]
    sub.restore()
    sub = substitute(model, nn.Linear, x, where=lambda name, m: m.out_features == 4 * m.in_features, cost_ratio=None)
    assert [n for n, _ in sub.placeholders] == ["blocks.0.mlp.fc", "blocks.1.mlp.fc"]


def test_other_skip_reasons():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ok = nn.Conv2d(4, 4, 3, padding=1)
            self.valid = nn.Conv2d(4, 4, 3, padding=0)
            self.dilated = nn.Conv2d(4, 4, 3, padding=2, dilation=2)
            self.even = nn.Conv2d(4, 4, 2, padding=1)
            self.rect = nn.Conv2d(4, 4, (1, 3), padding=(0, 1))
            self.reflect = nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
            self.same = nn.Conv2d(4, 4, 5, padding="same")
            self.unused = nn.Conv2d(4, 4, 3, padding=1)
            self.twice = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            y = self.ok(x) + self.dilated(x) + self.rect(x) + self.reflect(x) + self.same(x)
            y = y + F.pad(self.valid(x), (1, 1, 1, 1)) + self.even(x)[:, :, :-1, :-1]
            return self.twice(y) + self.twice(y[:, :, :4, :4]).sum()

    sub = substitute(Net(), nn.Conv2d, torch.randn(2, 4, 8, 8), kernel_sizes=None, cost_ratio=None)
    assert [n for n, _ in sub.placeholders] == ["ok", "same"]
    assert sub.mappings[1]["k"] == 5 and sub.mappings[0]["k"] == 3  # each mapping holds its own k
    got = dict(sub.skipped)
    assert got["valid"] == "padding (0, 0) is not same padding (1)"
    assert got["dilated"] == "dilation (2, 2) != 1"
    assert got["even"] == "kernel 2x2 (only square odd kernels)"
    assert got["rect"] == "kernel 1x3 (only square odd kernels)"
    assert got["reflect"] == "padding_mode='reflect' (only zero padding)"
    assert got["unused"] == "not called during the forward pass"
    assert got["twice"].startswith("called with different sizes")


# --------------------------------------------------------------------------------------------------------
# apply a sampled operator: forward, any batch size, one SGD step, restore
# --------------------------------------------------------------------------------------------------------

def check_sampled_operator(name: str, seed: int = 0, descent: bool = True, **kwargs) -> None:
    """`descent`: one SGD step lowers the loss; False: the loss is finite and every operator weight gets a finite,
    non-zero gradient (a model where random operators' activations explode at init, below)."""
    model, x, y = model_and_batch(name)
    model.eval()
    with torch.no_grad():
        reference = model(x)
    state = copy.deepcopy(model.state_dict())
    types = nn.Linear if name == "gpt" else nn.Conv2d
    sub = substitute(model, types, x, flops_ratio=1.0, **kwargs, cost_ratio=None)
    with torch.no_grad():
        assert torch.equal(model(x), reference)  # placeholders run the original layers

    op = sub.space.sample(1, seed=seed)[0]
    assert sub.operator_flops(op) <= sub.baseline_flops
    modules = sub.apply(op)
    assert len(modules) == len(sub.placeholders)
    assert len({id(p) for m in modules for p in m.parameters()}) == sum(
        len(list(m.parameters())) for m in modules)  # weights per placeholder
    live = {id(p) for p in model.parameters()}
    assert all(id(p) not in live for _, ph in sub.placeholders for p in ph.referred_layer.parameters())

    # the batch dim is free: every placeholder, and the model, run at other batch sizes. (Train mode: with
    # fresh BatchNorm statistics, eval mode lets a random operator's activations grow layer after layer.)
    with torch.no_grad():
        for _, p in sub.placeholders:
            for n in (1, 3):
                out = p(torch.randn(n, *p.input_shape[1:]))
                assert out.shape == (n, *p.output_shape[1:])
        model.train()
        xb = torch.cat([x, x[:1]])
        out = model(xb)
        assert out.shape[0] == 3 and torch.isfinite(out).all()

    if descent:
        before, after = sgd_step_lowers_loss(model, x, y)
        assert after < before, (name, op.hash, before, after)
    else:
        model.zero_grad()
        loss = loss_of(model, x, y)
        assert torch.isfinite(loss), (name, op.hash)
        loss.backward()
        grads = [p.grad for m in modules for p in m.parameters()]
        assert grads and all(g is not None and torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)

    sub.restore()
    assert sub.operator is None
    assert not any(isinstance(m, Placeholder) for m in model.modules())
    restored = model.state_dict()
    # the one SGD step trained the layers that were not replaced (BatchNorm, ...): compare replaced ones only
    for pname, _ in sub.placeholders:
        for key in [k for k in state if k.startswith(pname + ".")]:
            assert torch.equal(restored[key], state[key]), key


# ResNet-18: seeds whose operators cost less than the layers (seed 2's costs 64x them: ~30 s for the same checks);
# the heavy case is test_sampled_operator_trains_resnet18_heavy's
@pytest.mark.parametrize("name, seed", [("small_cnn", 0), ("resnet18", 5), ("resnet18", 3), ("resnext29_2x64d", 0),
                                        ("gpt", 0), ("gpt", 1)])
def test_sampled_operator_trains(name, seed):
    check_sampled_operator(name, seed=seed)


@pytest.mark.slow
def test_sampled_operator_trains_resnet18_heavy():
    model, x, _ = model_and_batch("resnet18")
    sub = substitute(model, nn.Conv2d, x, flops_ratio=1.0, cost_ratio=None)
    op = sub.space.sample(1, seed=0)[0]
    # an operator with a large outer-product intermediate: it materializes more than the layers' own cost
    contractions = [line for line in str(op).splitlines() if line.strip().startswith("CONTRACTION")]
    assert sub.cost_ratio(op) > 2 and any(" outer " in line for line in contractions), (sub.cost_ratio(op), str(op))
    check_sampled_operator("resnet18", seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", [
    # EfficientNet-V2-S: random operators' activations explode through its 40 layers at init (seed 0's,
    # 984402351be3a26e: gradient norm ~9e12): one SGD step of 0.01 raised the loss on this machine (2.258 -> 2.340,
    # at the issue's base too), and seeds 1-3's no better; its check is that gradients reach every operator weight
    ("resnet34", {}), ("densenet121", {}), ("efficientnet_v2_s", {"descent": False}),
    ("resnext29_2x64d", {"groups": True}),
])
def test_sampled_operator_trains_big(name, kwargs):
    check_sampled_operator(name, **kwargs)


def test_restore_gives_identical_outputs():
    model, x, _ = model_and_batch("resnet18")
    model.eval()
    with torch.no_grad():
        reference = model(x)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None)
    op = sub.space.sample(1, seed=3)[0]
    sub.apply(op)
    with torch.no_grad():
        assert not torch.equal(model(x), reference)
    sub.restore()
    with torch.no_grad():
        assert torch.equal(model(x), reference)
    assert list(model.state_dict()) == list(state)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    # apply again after restore: the placeholders go back in
    sub.apply(op)
    assert sum(isinstance(m, Placeholder) for m in model.modules()) == len(sub.placeholders)
    sub.reset()  # placeholders stay, original layers run
    with torch.no_grad():
        assert torch.equal(model(x), reference)


def test_substituted_model_exports_and_compiles():
    """torch.export (dynamic batch) and torch.compile of a whole model with operators installed (the
    generated forward is inlined into the model's graph)."""
    model, x, _ = model_and_batch("small_cnn")
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None)
    sub.apply(sub.space.sample(1, seed=2)[0])
    model.eval()
    x3 = torch.randn(3, *x.shape[1:])
    with torch.no_grad():
        want = model(x3)
        ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}})
        torch.testing.assert_close(ep.module()(x3), want, rtol=1e-5, atol=1e-5)
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(x3), want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------------------
# known operators with copied weights reproduce the original model
# --------------------------------------------------------------------------------------------------------

def test_conv2d_equivalent_matches_f_conv2d():
    """The conv-equivalent operator (known.conv2d) == F.conv2d after copying the weight [C_out, C_in, kh, kw]."""
    from syno_automl import OperatorSpace

    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2", "s=2: 2"], [{"N": 4, "C_in": 8, "C_out": 16, "H": 10, "W": 12}], max_depth=8)
    op = known.conv2d(space)
    module = op.to_module(0).double()
    (w,) = list(module.parameters())
    assert tuple(w.shape) == (16, 8, 3, 3)
    # starts like torch's default nn.Conv2d init: std 1 / sqrt(3 fan_in) (issue 10, item 6)
    assert abs(w.std().item() - (1 / (3 * 8 * 9)) ** 0.5) < 0.03
    x = torch.randn(3, 8, 10, 12, dtype=torch.float64, requires_grad=True)  # another batch size
    out = module(x)
    torch.testing.assert_close(out, F.conv2d(x, w, padding=1), rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(out)
    gx, gw = torch.autograd.grad(out, (x, w), grad)
    rx, rw = torch.autograd.grad(F.conv2d(x, w, padding=1), (x, w), grad)
    torch.testing.assert_close(gx, rx)
    torch.testing.assert_close(gw, rw)


def test_conv2d_equivalent_in_model_reproduces_model():
    model, x, _ = model_and_batch("resnet18")
    model.eval()
    with torch.no_grad():
        reference = model(x)
    sub = substitute(model, nn.Conv2d, x, cost_ratio=None)
    op = known.conv2d(sub.space)
    assert sub.operator_flops(op) == sub.baseline_flops
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        for _, p in sub.placeholders:
            p.referred_layer(torch.randn(p.input_shape))
    assert counter.get_total_flops() == sub.baseline_flops
    modules = sub.apply(op)
    with torch.no_grad():
        for (_, p), module in zip(sub.placeholders, modules):
            (w,) = list(module.parameters())
            w.copy_(p.referred_layer.weight)
        torch.testing.assert_close(model(x), reference, rtol=1e-4, atol=1e-4)


def test_linear_equivalent_reproduces_gpt():
    model, x, _ = model_and_batch("gpt")
    model.eval()
    with torch.no_grad():
        reference = model(x)
    sub = substitute(model, nn.Linear, x, where="*.qkv", cost_ratio=None)
    op = known.linear(sub.space)
    modules = sub.apply(op)
    with torch.no_grad():
        for (_, p), module in zip(sub.placeholders, modules):
            assert p.bias is not None and torch.count_nonzero(p.bias) == 0  # the layer had a bias: fresh zeros
            (w,) = list(module.parameters())
            w.copy_(p.referred_layer.weight)
            p.bias.copy_(p.referred_layer.bias)
        torch.testing.assert_close(model(x), reference, rtol=1e-5, atol=1e-5)
        # another batch size and sequence length: N = B * T is free
        x2 = torch.randint(0, 64, (3, 5))
        out = model(x2)
        sub.reset()
        torch.testing.assert_close(out, model(x2), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------------------
# budgets
# --------------------------------------------------------------------------------------------------------

def test_flops_ratio_budget():
    model, x, _ = model_and_batch("small_cnn")
    sub = substitute(model, nn.Conv2d, x, flops_ratio=0.5, min_flops_ratio=0.05, cost_ratio=None)
    assert sub.space.budgets["max_flops"] == 0.5 * sub.baseline_flops
    ops = sub.space.sample(5, seed=1)
    assert ops
    for op in ops:
        assert 0.05 <= sub.flops_ratio(op) <= 0.5
        assert sub.operator_flops(op) == op.total_flops()
    # the budget excludes the conv-equivalent operator (ratio 1)
    with pytest.raises(OperatorFormatError):
        known.conv2d(sub.space)


# --------------------------------------------------------------------------------------------------------
# the seed README: hand-placed placeholders
# --------------------------------------------------------------------------------------------------------

class ReadmeModel(nn.Module):
    def __init__(self):
        super().__init__()
        # Placeholders provide concrete values for symbolic variables
        self.kernel_1 = Placeholder({"H": 32, "W": 32})
        self.kernel_2 = Placeholder({"H": 16, "W": 16})
        self.kernel_3 = Placeholder({"H": 16, "W": 16})

    def forward(self, x: torch.Tensor):
        x = self.kernel_1(x)
        x = x.view(1, 1, 32, 32)
        x = F.avg_pool2d(x, 2)
        x = x.view(16, 16)
        x = self.kernel_2(x)
        x = self.kernel_3(x)
        return x


def test_readme_model():
    net = ReadmeModel()
    with pytest.raises(RuntimeError, match="no operator set"):
        net(torch.randn(32, 32))
    space = space_for(net, "[H, W]", "[H, W]", ["H: 2", "W: 2"], ["s_1=2: 2", "s_2=3: 2"], max_depth=6)
    assert space.num_mappings == 3
    assert [space.mapping(i)["H"] for i in range(3)] == [32, 16, 16]
    ops = space.sample(3, seed=0)
    assert ops
    for op in ops:
        modules = install(net, op)
        assert len(modules) == 3 and all(p.has_operator for _, p in placeholders(net))
        x = torch.randn(32, 32)
        out = net(x)
        assert out.shape == (16, 16) and torch.isfinite(out).all()
    target = torch.randn(16, 16)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    loss = F.mse_loss(net(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert F.mse_loss(net(x), target) < loss


def test_placeholder_state():
    conv = nn.Conv2d(3, 4, 3, padding=1)
    p = Placeholder({"N": 2}, conv, kind="conv2d")
    assert [n for n, _ in p.named_parameters()] == ["referred_layer.weight", "referred_layer.bias"]
    x = torch.randn(2, 3, 5, 5)
    assert torch.equal(p(x), conv(x))
    p.set_operator(nn.Conv2d(3, 4, 1, bias=False))
    assert p.referred_layer is conv and p.bias is not None and p.bias.shape == (4,)
    assert sorted(n for n, _ in p.named_parameters()) == ["bias", "operator.weight"]
    assert p(x).shape == (2, 4, 5, 5)
    p.reset()
    assert p.operator is None and p.bias is None and torch.equal(p(x), conv(x))
    assert [n for n, _ in p.named_parameters()] == ["referred_layer.weight", "referred_layer.bias"]


# --------------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------------

def test_errors():
    model, x, _ = model_and_batch("small_cnn")
    with pytest.raises(SubstitutionError, match="unsupported layer type .*Conv3d"):
        substitute(model, nn.Conv3d, x, cost_ratio=None)
    with pytest.raises(SubstitutionError, match="unsupported layer type .*LSTM"):
        substitute(model, (nn.Conv2d, nn.LSTM), x, cost_ratio=None)
    with pytest.raises(SubstitutionError, match="not an nn.Module class"):
        substitute(model, "conv", x, cost_ratio=None)
    with pytest.raises(SubstitutionError, match="example_input"):
        substitute(model, nn.Conv2d, None, cost_ratio=None)
    with pytest.raises(SubstitutionError, match="no layer can be substituted"):
        substitute(model, nn.Conv2d, x, where="nothing*", cost_ratio=None)
    with pytest.raises(SubstitutionError, match="once per layer type"):
        substitute(model, (nn.Conv2d, nn.Linear), x, cost_ratio=None)
    gpt, tokens, _ = model_and_batch("gpt")
    with pytest.raises(SubstitutionError, match="no Conv2d layer"):
        substitute(gpt, nn.Conv2d, tokens, cost_ratio=None)
    # a failed substitute leaves the model untouched
    assert not any(isinstance(m, Placeholder) for m in model.modules())
    with pytest.raises(SubstitutionError, match="no Placeholder"):
        space_for(model, "[H, W]", "[H, W]", ["H: 2", "W: 2"])
