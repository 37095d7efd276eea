"""The torch generator's two lowerings of a contraction after unfolds (issue 45, item 2): ``contraction="conv"``
(one ``F.conv1d``/``F.conv2d``, the default) and ``contraction="matmul"`` (unfold views, then mm/bmm, so that
Inductor's max-autotune can fuse the views into its GEMM template) compute the same values and gradients."""
from __future__ import annotations

import pytest
import torch
from _syno_helpers import conv_space, random_spec_space

from syno_automl import OperatorSpace, known
from syno_automl.codegen.torch import build_module, program_to_source
from syno_automl.errors import OptionError


def _input(program: dict, batch: int = 2) -> torch.Tensor:
    shape = [batch if d in program.get("free_dims", ()) else s
             for d, s in zip(program["input"]["dims"], program["input"]["shape"])]
    return torch.randn(*shape, dtype=torch.float64)


def _agree(program: dict) -> None:
    torch.manual_seed(0)
    conv = build_module(program).double()
    mm = build_module(program, contraction="matmul").double()
    mm.load_state_dict(conv.state_dict())
    x = _input(program).requires_grad_(True)
    y_conv, y_mm = conv(x), mm(x)
    torch.testing.assert_close(y_mm, y_conv, rtol=1e-10, atol=1e-12)
    g = torch.randn_like(y_conv)
    params = list(conv.parameters())
    grads_conv = torch.autograd.grad(y_conv, [x, *params], g)
    grads_mm = torch.autograd.grad(y_mm, [x, *mm.parameters()], g)
    for a, b in zip(grads_mm, grads_conv):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_sampled_convolutions_agree() -> None:
    """The conv pattern is rare in samples (4 in 1,000 of this depth-6 space): those found agree; every other
    operator has the same source in both lowerings."""
    ops = conv_space().sample(1000, seed=3)
    convs = 0
    for op in ops:
        program = op.program(0)
        conv_src, mm_src = program_to_source(program), program_to_source(program, contraction="matmul")
        assert "F.conv" not in mm_src
        if "F.conv" in conv_src:
            convs += 1
            _agree(program)
        else:
            assert mm_src == conv_src
    assert convs >= 3, f"only {convs} of {len(ops)} sampled operators lower to a convolution: the test says little"


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d", "grouped_conv2d"])
def test_known_conv2d_forms_agree(name: str) -> None:
    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2", "g=2: 2"], [{"N": 2, "C_in": 4, "C_out": 6, "H": 7, "W": 6}], max_depth=8)
    if name == "depthwise_conv2d":
        space = OperatorSpace("[N, C, H, W]", "[N, C, H, W]", ["N: 0", "C: 3", "H: 2", "W: 2"], ["k=3: 2"],
                              [{"N": 2, "C": 4, "H": 7, "W": 6}], max_depth=6)
    program = getattr(known, name)(space).program(0)
    assert "F.conv2d" in program_to_source(program)
    _agree(program)


@pytest.mark.parametrize("name", ["conv1d", "depthwise_conv1d", "grouped_conv1d"])
def test_known_conv1d_forms_agree(name: str) -> None:
    space = OperatorSpace("[N, C_in, L]", "[N, C_out, L]", ["N: 0", "C_in: 2", "C_out: 2", "L: 2"],
                          ["k=3: 2", "g=2: 2"], [{"N": 2, "C_in": 4, "C_out": 6, "L": 9}], max_depth=7)
    if name == "depthwise_conv1d":
        space = OperatorSpace("[N, C, L]", "[N, C, L]", ["N: 0", "C: 3", "L: 2"], ["k=3: 2"],
                              [{"N": 2, "C": 4, "L": 9}], max_depth=5)
    program = getattr(known, name)(space).program(0)
    assert "F.conv1d" in program_to_source(program)
    _agree(program)


def test_known_conv2d_as_matmul() -> None:
    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2"], [{"N": 2, "C_in": 3, "C_out": 5, "H": 7, "W": 6}], max_depth=6)
    op = known.conv2d(space)
    src = op.to_source(contraction="matmul")
    assert "F.conv2d" not in src and ("torch.mm" in src or "torch.bmm" in src)
    module = op.to_module(contraction="matmul").double()
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    torch.testing.assert_close(module(x), torch.nn.functional.conv2d(x, module.w0, padding=1))
    _agree(op.program(0))


def test_unknown_contraction_refused() -> None:
    op = random_spec_space("conv2d").sample(1, seed=0)[0]
    with pytest.raises(OptionError, match="contraction"):
        op.to_module(contraction="einsum")
