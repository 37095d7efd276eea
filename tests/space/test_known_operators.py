"""Known operators, reached by canonical walks, equal the PyTorch ops: forward and input/weight gradients."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from syno_automl import OperatorSpace, known


def check(module: torch.nn.Module, x: torch.Tensor, reference) -> None:
    """Forward and gradients of the generated module against `reference(x, *weights)` (float64)."""
    module = module.double()
    x = x.double().requires_grad_(True)
    weights = list(module.parameters())
    out = module(x)
    x_ref = x.detach().clone().requires_grad_(True)
    w_ref = [w.detach().clone().requires_grad_(True) for w in weights]
    expected = reference(x_ref, *w_ref)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-8)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-8)
    for w, r in zip(weights, w_ref):
        torch.testing.assert_close(w.grad, r.grad, rtol=1e-5, atol=1e-8)


def test_conv2d() -> None:
    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2"], [{"N": 2, "C_in": 3, "C_out": 5, "H": 7, "W": 6}], max_depth=6)
    check(known.conv2d(space).to_module(), torch.randn(2, 3, 7, 6), lambda x, w: F.conv2d(x, w, padding=1))


def test_depthwise_conv2d() -> None:
    space = OperatorSpace("[N, C, H, W]", "[N, C, H, W]", ["N: 0", "C: 3", "H: 2", "W: 2"], ["k=3: 2"],
                          [{"N": 2, "C": 4, "H": 7, "W": 6}], max_depth=6)
    check(known.depthwise_conv2d(space).to_module(), torch.randn(2, 4, 7, 6),
          lambda x, w: F.conv2d(x, w.unsqueeze(1), padding=1, groups=4))


def test_grouped_conv2d() -> None:
    space = OperatorSpace("[N, C_in, H, W]", "[N, C_out, H, W]", ["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"],
                          ["k=3: 2", "g=2: 2"], [{"N": 2, "C_in": 4, "C_out": 6, "H": 7, "W": 6}], max_depth=8)
    check(known.grouped_conv2d(space).to_module(), torch.randn(2, 4, 7, 6),
          lambda x, w: F.conv2d(x, w.reshape(6, 2, 3, 3), padding=1, groups=2))


@pytest.mark.parametrize("s", [2, 3])
def test_avg_pool2d_with_stride(s: int) -> None:
    space = OperatorSpace("[N, C, H, W]", "[N, C, s^-1*H, s^-1*W]", ["N: 0", "C: 2", "H: 2", "W: 2"], [f"s={s}: 2"],
                          [{"N": 2, "C": 4, "H": 6 * s, "W": 2 * s}], max_depth=4, min_weights=0)
    check(known.avg_pool2d(space).to_module(), torch.randn(2, 4, 6 * s, 2 * s), lambda x: F.avg_pool2d(x, s))


def test_pixel_shuffle() -> None:
    space = OperatorSpace("[N, s^2*C, H, W]", "[N, C, s*H, s*W]", ["N: 0", "C: 2", "H: 2", "W: 2"], ["s=2: 3"],
                          [{"N": 2, "C": 3, "H": 4, "W": 5}], max_depth=4, min_weights=0)
    check(known.pixel_shuffle(space).to_module(), torch.randn(2, 12, 4, 5), lambda x: F.pixel_shuffle(x, 2))


def test_linear() -> None:
    space = OperatorSpace("[N, C_in]", "[N, C_out]", ["N: 0", "C_in: 2", "C_out: 2"], [],
                          [{"N": 3, "C_in": 5, "C_out": 7}], max_depth=3)
    check(known.linear(space).to_module(), torch.randn(3, 5), lambda x, w: F.linear(x, w))
