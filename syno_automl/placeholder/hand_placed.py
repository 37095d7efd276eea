"""Hand-placed placeholders, as in the paper's README.

Put ``Placeholder({"H": 32, "W": 32})`` slots in a model, build the
space with :func:`space_for` and fill them with :func:`install`::

    space = space_for(net, "[H, W]", "[H, W]", ["H: 2", "W: 2"], ["s_1=2: 2", "s_2=3: 2"])
    install(net, space.sample(1)[0])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from syno_automl.errors import SubstitutionError
from syno_automl.placeholder.slot import Placeholder
from syno_automl.space import Operator, OperatorSpace

__all__ = ["placeholders", "record_shapes", "space_for", "install"]


def placeholders(model: nn.Module) -> list[tuple[str, Placeholder]]:
    """The model's Placeholders (qualified name, module), in module order (= the space's mapping order)."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, Placeholder)]


def record_shapes(model: nn.Module, *example_args: Any, **example_kwargs: Any) -> Any:
    """Runs one forward pass (no grad) recording every Placeholder's ``input_shape``/``output_shape``."""
    phs = [p for _, p in placeholders(model)]
    for p in phs:
        p.recording = True
    try:
        with torch.no_grad():
            return model(*example_args, **example_kwargs)
    finally:
        for p in phs:
            p.recording = False


def space_for(model: nn.Module, input_shape: str, output_shape: str, primary: Sequence[str] = (),
              coefficients: Sequence[str] = (), **kw: Any) -> OperatorSpace:
    """The OperatorSpace for a model's hand-placed Placeholders: one mapping per placeholder (its ``mapping``),
    in module order. ``kw`` goes to :class:`OperatorSpace` (``max_depth``, budgets, ``seed``...)."""
    phs = placeholders(model)
    if not phs:
        raise SubstitutionError("the model has no Placeholder")
    return OperatorSpace(input_shape, output_shape, primary, coefficients, [p.mapping for _, p in phs], **kw)


def install(model_or_placeholders: nn.Module | Sequence[Placeholder] | Sequence[tuple[str, Placeholder]],
            op: Operator, *, bias: bool | None = None) -> list[nn.Module]:
    """Sets ``op.to_module(i)`` (fresh weights each) in the i-th placeholder; returns the modules.

    ``op.space`` must have one mapping per placeholder (as built by :func:`space_for`)."""
    if isinstance(model_or_placeholders, nn.Module):
        phs = [p for _, p in placeholders(model_or_placeholders)]
    else:
        phs = [p[1] if isinstance(p, tuple) else p for p in model_or_placeholders]
    if op.space.num_mappings != len(phs):
        raise SubstitutionError(f"the operator's space has {op.space.num_mappings} mappings for "
                                f"{len(phs)} placeholders")
    modules = []
    for i, p in enumerate(phs):
        module = op.to_module(i)
        p.set_operator(module, bias=bias)
        modules.append(module)
    return modules
