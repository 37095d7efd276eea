"""The space substitute() builds for the layers it replaces: grouped convs reachable (beside a dense layer too),
depthwise ones not replaced by dearer operators unless asked, the core's unfold default only ever lowered."""
from __future__ import annotations

import pytest

from syno_automl import _native, known


def _conv_model(*layers):
    import torch
    from torch import nn

    return nn.Sequential(*layers), torch.randn(2, 8, 8, 8)


def test_substituted_grouped_convs_are_reachable() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.Conv2d(8, 8, 3, padding=1, groups=2))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=8, cost_ratio=None)
    assert "g=2: 2" in sub.space.coefficients
    op = known.grouped_conv2d(sub.space)
    assert op.total_flops() == sub.baseline_flops


def test_a_dense_layer_beside_grouped_ones_keeps_the_grouped_conv_reachable() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1, groups=2))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=8, cost_ratio=None)
    assert [m["g"] for m in sub.mappings] == [2, 2]
    known.grouped_conv2d(sub.space)


def test_depthwise_convs_are_not_replaced_by_dearer_operators_unless_asked() -> None:
    from torch import nn

    from syno_automl import substitute

    model, x = _conv_model(nn.Conv2d(8, 8, 3, padding=1, groups=8))
    sub = substitute(model, nn.Conv2d, x, groups=True, max_depth=6, cost_ratio=None)
    assert sub.space.budgets["max_flops"] == sub.baseline_flops
    for op in sub.space.sample(5, seed=0, time_limit=30):
        assert op.total_flops() <= sub.baseline_flops
    sub.restore()
    free = substitute(model, nn.Conv2d, x, groups=True, max_depth=6, flops_ratio=25.0, cost_ratio=None)
    assert free.space.budgets["max_flops"] == 25.0 * free.baseline_flops


def test_unfold_ratio_is_lowered_from_the_cores_default_never_raised() -> None:
    from torch import nn

    from syno_automl import substitute

    assert _native.default_options()["min_unfold_ratio"] == 1.0
    import torch

    big = substitute(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1)), nn.Conv2d, torch.randn(1, 4, 8, 8), cost_ratio=None)
    assert "min_unfold_ratio" not in big.space.options  # 8 / 3 > 1.0: the default stands
    small = substitute(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1)), nn.Conv2d, torch.randn(1, 4, 2, 2),
                       cost_ratio=None)
    assert small.space.options["min_unfold_ratio"] == pytest.approx(2 / 3)
    known.conv2d(small.space)
