"""1-D convolutions everywhere 2-D ones go (issue 33, item 2): substitute() finds nn.Conv1d layers ([N, C_in, L] ->
[N, C_out, L]), the known forms (conv1d, depthwise, grouped, pointwise) are reachable and equal F.conv1d, classify
names them, export and the TVM path take them, and the cost plan prices a Conv1d layer as one convolution."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from syno_automl import OperatorSpace, known
from syno_automl.errors import SubstitutionError
from syno_automl.export import layer_source
from syno_automl.placeholder import Placeholder, layer_cost, layer_flops, substitute
from syno_automl.search.callbacks import SynoSubstitution

PRIMARY = ["N: 0", "C_in: 2", "C_out: 2", "L: 2"]


def conv1d_space(k: int = 3, mapping: dict | None = None, **options) -> OperatorSpace:
    mapping = mapping or {"N": 2, "C_in": 4, "C_out": 6, "L": 11}
    return OperatorSpace("[N, C_in, L]", "[N, C_out, L]", PRIMARY, [f"k={k}: 2", "s=2: 2"], [mapping],
                         max_depth=8, **options)


class Mixed(nn.Module):
    """A 1-D branch (a stem from 1 channel, a 3- and a 5-wide conv) beside a 2-D one and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, 8, 3, padding=1)
        self.a = nn.Conv1d(8, 8, 3, padding=1)
        self.b = nn.Conv1d(8, 16, 5, padding=2, bias=False)
        self.image = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(16, 5)

    def forward(self, seq: torch.Tensor, img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.b(torch.relu(self.a(torch.relu(self.stem(seq)))))
        return self.head(h.mean(-1)), self.image(img)


def mixed_batch(n: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 1, 24), torch.randn(n, 3, 6, 6)


# -- substitute() -------------------------------------------------------------------------------------------------

def test_only_the_conv1d_layers_of_a_mixed_model_are_replaced() -> None:
    torch.manual_seed(0)
    model = Mixed()
    sub = substitute(model, nn.Conv1d, mixed_batch(), kernel_sizes=None, where=lambda n, m: n != "stem",
                     flops_ratio=1.0, cost_ratio=None)
    assert sub.kind == "conv1d" and [n for n, _ in sub.placeholders] == ["a", "b"]
    assert sub.mappings == [{"N": 2, "C_in": 8, "C_out": 8, "L": 24, "k": 3},
                            {"N": 2, "C_in": 8, "C_out": 16, "L": 24, "k": 5}]
    assert sub.skipped == [("stem", "excluded by where")]
    assert type(model.image) is nn.Conv2d and type(model.stem) is nn.Conv1d
    assert sub.baseline_flops == 2 * 2 * 24 * (8 * 8 * 3 + 16 * 8 * 5)
    op = sub.space.sample(1, seed=1)[0]
    sub.apply(op)
    seq, img = mixed_batch(3)  # another batch size: N is free
    logits, image = model(seq, img)
    assert logits.shape == (3, 5) and image.shape == (3, 4, 6, 6)
    (logits.sum() + image.sum()).backward()
    assert all(p.grad is not None for _, ph in sub.placeholders for p in ph.operator.parameters())
    assert sub.placeholders[0][1].bias is not None and sub.placeholders[1][1].bias is None  # as the layers had
    sub.restore()
    assert type(model.a) is nn.Conv1d and type(model.b) is nn.Conv1d


@pytest.mark.parametrize("types, named", [((nn.Conv1d, nn.Conv2d), "Conv1d and Conv2d"),
                                          ((nn.Linear, nn.Conv1d), "Conv1d and Linear")])
def test_two_kinds_in_one_substitution_are_refused(types: tuple, named: str) -> None:
    model = Mixed()
    with pytest.raises(SubstitutionError, match=f"both {named} layers would be substituted.*once per layer type"):
        substitute(model, types, mixed_batch(), cost_ratio=None)
    assert not any(isinstance(m, Placeholder) for m in model.modules())


@pytest.mark.parametrize("layer, reason", [
    (nn.Conv1d(4, 4, 3, padding=1, stride=2), "stride 2 != 1"),
    (nn.Conv1d(4, 4, 3, padding=2, dilation=2), "dilation 2 != 1"),
    (nn.Conv1d(4, 4, 3), "padding 0 is not same padding (1)"),
    (nn.Conv1d(4, 4, 4, padding=2), "kernel 4 (only odd kernels)"),
    (nn.Conv1d(4, 4, 3, padding=1, padding_mode="circular"), "padding_mode='circular' (only zero padding)"),
    (nn.Conv1d(4, 4, 5, padding=2), "kernel 5 not in kernel_sizes=(3,)"),
    (nn.Conv1d(4, 4, 3, padding=1, groups=2), "groups=2 (grouped; pass groups=True to substitute grouped"),
    (nn.Conv1d(4, 4, 3, padding=1, groups=4), "groups=4 (depthwise; pass groups=True"),
])
def test_why_a_conv1d_is_left_alone(layer: nn.Conv1d, reason: str) -> None:
    model = nn.Sequential(nn.Conv1d(4, 4, 3, padding="same"), layer)
    sub = substitute(model, nn.Conv1d, torch.randn(2, 4, 16), cost_ratio=None)
    assert [n for n, _ in sub.placeholders] == ["0"]  # padding="same" is same padding
    assert sub.skipped[0][0] == "1" and sub.skipped[0][1].startswith(reason)


def test_grouped_conv1d_layers_with_groups_true() -> None:
    model = nn.Sequential(nn.Conv1d(8, 8, 3, padding=1, groups=2), nn.Conv1d(8, 8, 3, padding=1))
    sub = substitute(model, nn.Conv1d, torch.randn(2, 8, 16), groups=True)
    assert sub.space.config()["coefficients"] == ["k=3: 2", "s=2: 2", "g=2: 2"]
    assert [m["g"] for m in sub.mappings] == [2, 2] and sub.space.budgets["max_flops"] == sub.baseline_flops
    op = known.grouped_conv1d(sub.space)  # the grouped layer itself is in the space
    assert known.classify(op) == "grouped conv1d 3, g groups"


def test_the_conv1d_operator_with_the_layers_weights_is_the_model() -> None:
    """known.conv1d in substitute()'s own space, with each layer's weight copied in: the model's output is the
    original's (the operator is the layer, not an approximation)."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 8, 3, padding=1))
    x = torch.randn(3, 4, 20)
    before = model(x)
    sub = substitute(model, nn.Conv1d, x)
    modules = sub.apply(known.conv1d(sub.space))
    with torch.no_grad():
        for (_, ph), module in zip(sub.placeholders, modules):
            module.w0.copy_(ph.referred_layer.weight)
            ph.bias.copy_(ph.referred_layer.bias)
    torch.testing.assert_close(model(x), before)


def test_syno_substitution_callback_takes_conv1d() -> None:
    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.BatchNorm1d(8), nn.Conv1d(8, 8, 3, padding=1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

    x = torch.randn(4, 4, 16)
    module = Tiny()
    op = known.conv1d(substitute(Tiny(), nn.Conv1d, x).space)
    cb = SynoSubstitution(op, layer=nn.Conv1d, example_input=x)
    cb.setup(None, module, "fit")  # type: ignore[arg-type]  # the trainer is read only without example_input
    assert cb.flops_ratio_used == pytest.approx(1.0) and isinstance(module.net[0], Placeholder)
    module(x).sum().backward()


# -- known forms and classify -------------------------------------------------------------------------------------

def check(module: nn.Module, x: torch.Tensor, reference) -> None:
    """Forward and input/weight gradients of the generated module against `reference(x, *weights)` (float64)."""
    module = module.double()
    x = x.double().requires_grad_(True)
    weights = list(module.parameters())
    x_ref = x.detach().clone().requires_grad_(True)
    w_ref = [w.detach().clone().requires_grad_(True) for w in weights]
    out, expected = module(x), reference(x_ref, *w_ref)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    for got, want in zip([x, *weights], [x_ref, *w_ref]):
        torch.testing.assert_close(got.grad, want.grad)


DEPTHWISE = {"N": 2, "C": 4, "L": 11}


@pytest.mark.parametrize("k, build, reference, name", [
    (3, known.conv1d, lambda x, w: F.conv1d(x, w, padding=1), "conv1d 3"),
    (5, known.conv1d, lambda x, w: F.conv1d(x, w, padding=2), "conv1d 5"),
    (3, lambda s: known.grouped_conv1d(s, "s"), lambda x, w: F.conv1d(x, w.reshape(6, 2, 3), padding=1, groups=2),
     "grouped conv1d 3, s groups"),
    (5, lambda s: known.grouped_conv1d(s, "s"), lambda x, w: F.conv1d(x, w.reshape(6, 2, 5), padding=2, groups=2),
     "grouped conv1d 5, s groups"),
    (1, known.pointwise_conv1d, lambda x, w: F.conv1d(x, w.unsqueeze(-1)), "pointwise conv1d"),
    (3, known.pointwise_conv1d, lambda x, w: F.conv1d(x, w.unsqueeze(-1)), "pointwise conv1d"),
])
def test_known_conv1d_forms_equal_torch(k: int, build, reference, name: str) -> None:
    op = build(conv1d_space(k))
    assert known.classify(op) == name
    check(op.to_module(), torch.randn(3, 4, 11), reference)  # N = 3: the batch is free


@pytest.mark.parametrize("k", [3, 5])
def test_known_depthwise_conv1d_equals_torch(k: int) -> None:
    space = OperatorSpace("[N, C, L]", "[N, C, L]", ["N: 0", "C: 3", "L: 2"], [f"k={k}: 2"], [DEPTHWISE], max_depth=6)
    op = known.depthwise_conv1d(space)
    assert known.classify(op) == f"depthwise conv1d {k}"
    check(op.to_module(), torch.randn(2, 4, 11), lambda x, w: F.conv1d(x, w.unsqueeze(1), padding=k // 2, groups=4))


@pytest.mark.parametrize("steps, name", [
    (["REDUCE C_in", "SHIFT C_out", "CONTRACTION share [C_in] outer [C_out]"], "pointwise conv1d, channels permuted"),
    (["REDUCE C_in", "SHIFT L", "CONTRACTION share [C_in] outer [C_out]"], None),  # a shift in time: new
])
def test_classify_other_conv1d_forms(steps: list[str], name: str | None) -> None:
    assert known.classify(known.walk(conv1d_space(), steps)) == name


def test_the_core_samples_a_conv1d_space_and_its_conv_is_one_conv1d() -> None:
    """No special case in the core: a spec with one spatial coordinate samples operators, and the generated module
    runs the conv-equivalent as one F.conv1d on x (no im2col), as the cost model (native/cost.cpp) plans it."""
    space = conv1d_space()
    assert len(space.sample(5, seed=3)) == 5
    assert [label for label, _ in known.opening(space)] == ["grouped conv1d, s groups"]  # the search's opening
    for build, conv in ((known.conv1d, "F.conv1d(t, self.w0, padding=(1,))"),
                        (lambda s: known.grouped_conv1d(s, "s"), "groups=2")):
        source = build(space).to_source(0)
        assert conv in source and ".unfold(" not in source, source


# -- cost, export, TVM, baseline ------------------------------------------------------------------------------------

def test_the_cost_plan_prices_a_conv1d_layer_as_its_conv_equivalent() -> None:
    model = nn.Sequential(nn.Conv1d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv1d(64, 64, 3, padding=1))
    x = torch.randn(8, 64, 40)
    layer = model[0]
    assert layer_flops(layer, x.shape, x.shape) == 2 * 8 * 64 * 40 * 64 * 3
    for target in (None, "cuda.eager"):
        sub = substitute(model, nn.Conv1d, x, flops_ratio=1.0, cost_ratio=1.0, target=target)
        op = known.conv1d(sub.space)  # within both budgets: its plan costs exactly what the layers cost
        assert sub.operator_flops(op) == sub.baseline_flops
        assert sub.operator_cost(op) == pytest.approx(sub.baseline_cost, rel=1e-9)
        if target is None:  # sparse (3 in 2000 descents): memory, not FLOPs, is most of a k=3 conv1d's cost
            assert len(sub.space.sample(1, seed=0)) == 1
        sub.restore()
    cost = known.conv1d(conv1d_space(mapping={"N": 8, "C_in": 64, "C_out": 64, "L": 40})).cost(0)
    assert cost["materialized"] == 8 * 64 * 40 + 64 * 64 * 3  # its output and its weight's gradient: no copy
    assert cost["total"] == layer_cost(cost["flops"], (8, 64, 40), 64 * 64 * 3)


def test_export_of_a_conv1d_operator_is_a_torch_only_layer(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv1d(4, 6, 3, padding=1))
    x = torch.randn(2, 4, 12)
    sub = substitute(model, nn.Conv1d, x, cost_ratio=None)
    op = sub.space.sample(1, seed=4)[0]
    sub.apply(op)
    ph = sub.placeholders[0][1]
    source = layer_source(op, 0, kind="conv1d", bias=True)
    namespace: dict = {"__name__": "exported"}
    exec(compile(source, "exported.py", "exec"), namespace)
    layer = namespace["SynoLayer"]()
    assert layer.KIND == "conv1d" and layer.INPUT_SHAPE == (None, 4, 12) and layer.OUTPUT_SHAPE == (None, 6, 12)
    layer.load_state_dict(ph.state_dict())  # the keys of the search's Placeholder
    with torch.no_grad():
        ph.bias.normal_()
        layer.bias.copy_(ph.bias)
        batch = torch.randn(5, 4, 12)
        torch.testing.assert_close(layer(batch), model(batch))
    with pytest.raises(ValueError, match=re.escape("expects an input of shape [None, 4, 12]")):
        layer(torch.randn(5, 4, 13))
    path = tmp_path / "op.py"
    path.write_text(source)
    run = subprocess.run([sys.executable, "-c", f"import runpy, sys; runpy.run_path({str(path)!r}, "
                          "run_name='__main__'); print(sorted(m for m in sys.modules if m.startswith('syno')))"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["ok: [2, 4, 12] -> [2, 6, 12]", "[]"]


def test_the_tvm_path_compiles_a_conv1d_operator_and_its_baseline() -> None:
    tvm_codegen = pytest.importorskip("syno_automl.codegen.tvm")
    from syno_automl import measure

    op = known.conv1d(conv1d_space(mapping={"N": 1, "C_in": 3, "C_out": 4, "L": 9}))
    x, w = torch.randn(1, 3, 9), torch.randn(4, 3, 3)
    want = F.conv1d(x, w, padding=1).numpy()
    got = tvm_codegen.build_kernel(op.program(0))(x.numpy(), w.numpy())
    assert got.shape == want.shape and abs(got - want).max() < 1e-4
    desc = measure.infer_baseline(op.program(0))
    assert desc == {"kind": "conv1d", "N": 1, "C_in": 3, "C_out": 4, "L": 9, "k": 3, "stride": 1}
    base = tvm_codegen.build_kernel(measure.baseline_kernel(desc))(x.numpy(), w.numpy())
    assert abs(base - want).max() < 1e-4
    module = measure.baseline_module(desc)
    assert isinstance(module, nn.Conv1d) and module.weight.shape == (4, 3, 3) and module.padding == (1,)
    strided = measure.conv1d_ncw_te(1, 3, 4, 9, 3, stride=2)
    got = tvm_codegen.build_kernel(strided)(x.numpy(), w.numpy())
    assert abs(got - F.conv1d(x, w, padding=1, stride=2).numpy()).max() < 1e-4
