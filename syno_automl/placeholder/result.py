"""What :func:`~syno_automl.placeholder.substitution.substitute` returns: the :class:`Substitution`.

:func:`install_placeholders` puts a Placeholder in every place holding a chosen layer; the Substitution then installs
an operator in all of them (``apply``), runs the originals again (``reset``), puts the originals back (``restore``),
copies the model, and prices an operator against the replaced layers (FLOPs, cost, parameters).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from syno_automl.errors import SubstitutionError
from syno_automl.placeholder.hand_placed import placeholders
from syno_automl.placeholder.sites import Choice
from syno_automl.placeholder.slot import Placeholder
from syno_automl.placeholder.space_spec import Measures
from syno_automl.space import Operator, OperatorSpace


@dataclass
class Substitution:
    """Result of :func:`substitute`.

    Attributes:
        model: the model (modified in place: the substituted layers are now Placeholders).
        placeholders: ``[(qualified name, Placeholder)]``; placeholder i uses the space's mapping i.
        skipped: ``[(qualified name, reason)]`` for every layer of the requested types left alone.
        space: the OperatorSpace (one mapping per placeholder, budgets relative to ``baseline_flops``).
        kind: ``"conv1d"``, ``"conv2d"`` or ``"linear"`` (``layers.KINDS``).
        layer_flops: FLOPs of each replaced layer (at the example's sizes); ``baseline_flops`` is their sum.
        layer_types: the layer types asked for; ``options``: every other argument of :func:`substitute` as given
            (``where``, the budgets, ``target``, ``kernel_sizes``, ``groups``...), so that the same choices can be
            made again on another copy of the model (``SynoSubstitution(trial, substitution=sub)``).
    """

    model: nn.Module
    placeholders: list[tuple[str, Placeholder]]
    skipped: list[tuple[str, str]]
    space: OperatorSpace
    kind: str
    layer_flops: list[int]
    _sites: dict[str, list[tuple[nn.Module, str]]] = field(default_factory=dict, repr=False)
    layer_costs: list[float] = field(default_factory=list)
    _installed: bool = field(default=True, repr=False)
    operator: Operator | None = field(default=None, repr=False)
    layer_types: tuple[type, ...] = ()
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def baseline_flops(self) -> int:
        return sum(self.layer_flops)

    @property
    def mappings(self) -> list[dict[str, int]]:
        return [dict(p.mapping) for _, p in self.placeholders]

    def operator_flops(self, op: Operator) -> int:
        """The operator's FLOPs summed over all placeholders (what ``flops_ratio`` limits)."""
        return sum(op.flops(self.mapping_for(op, i)) for i in range(len(self.placeholders)))

    def flops_ratio(self, op: Operator) -> float:
        return self.operator_flops(op) / self.baseline_flops if self.baseline_flops else math.inf

    @property
    def baseline_cost(self) -> float:
        """The replaced layers' cost in the units of ``Operator.cost`` (what ``cost_ratio`` is relative to)."""
        return sum(self.layer_costs)

    def operator_cost(self, op: Operator) -> float:
        """The operator's planned cost (``total``) summed over all placeholders (what ``cost_ratio`` limits)."""
        return sum(c["total"] for c in self.operator_costs(op))

    def operator_costs(self, op: Operator) -> list[dict[str, float]]:
        """The operator's planned cost figures in each placeholder, priced by this substitution's profile (the
        units of ``baseline_cost``), whatever space `op` was made in."""
        # an operator of another space carries that space's profile in its own totals
        target = None if op.space is self.space else (self.space.cost_profile or "cpu.eager")
        return [op.cost(self.mapping_for(op, i), target=target) for i in range(len(self.placeholders))]

    def cost_ratio(self, op: Operator) -> float:
        return self.operator_cost(op) / self.baseline_cost if self.baseline_cost else math.inf

    def operator_params(self, op: Operator) -> int:
        return sum(op.params(self.mapping_for(op, i)) for i in range(len(self.placeholders)))

    def mapping_for(self, op: Operator, i: int) -> int | dict[str, int]:
        if op.space is self.space:
            return i
        if op.space.signature() != self.space.signature():
            raise SubstitutionError(f"operator {op.hash} was made in space {op.space.signature()}, not in this "
                                    f"substitution's space {self.space.signature()}")
        return self.space.mapping(i)

    def apply(self, op: Operator, *, bias: bool | None = None) -> list[nn.Module]:
        """Installs ``op`` in every placeholder (fresh weights per placeholder, on the original layer's
        device/dtype); returns the operator modules. Re-inserts the placeholders if ``restore()`` was called."""
        modules = [op.to_module(self.mapping_for(op, i)) for i in range(len(self.placeholders))]
        self._reinsert()
        for (_, p), module in zip(self.placeholders, modules):
            p.set_operator(module, bias=bias)
        self.operator = op
        return modules

    def reset(self) -> None:
        """Every placeholder runs its original layer again (placeholders stay in the model)."""
        for _, p in self.placeholders:
            p.reset()
        self.operator = None

    def restore(self) -> nn.Module:
        """Puts the original layers back in place of the placeholders; returns the model."""
        self.reset()
        for name, p in self.placeholders:
            for parent, attr in self._sites[name]:
                setattr(parent, attr, p.referred_layer)
        self._installed = False
        return self.model

    def copy_model(self) -> nn.Module:
        """A deep copy of the model with the placeholders in place (running what they run now); the
        substitution and its model are left as they were (after ``restore()`` too)."""
        if self._installed:
            return copy.deepcopy(self.model)
        for name, p in self.placeholders:
            for parent, attr in self._sites[name]:
                setattr(parent, attr, p)
        try:
            return copy.deepcopy(self.model)
        finally:
            for name, p in self.placeholders:
                for parent, attr in self._sites[name]:
                    setattr(parent, attr, p.referred_layer)

    def original_model(self) -> nn.Module:
        """A deep copy of the model whose placeholders all run their original layers (the baseline a speed is
        measured against); the substitution and its model are left as they were."""
        model = self.copy_model()
        for _, p in placeholders(model):
            p.reset()
        return model

    def _reinsert(self) -> None:
        if self._installed:
            return
        for name, p in self.placeholders:
            p.reset()
            for parent, attr in self._sites[name]:
                setattr(parent, attr, p)
        self._installed = True

    def summary(self) -> str:
        lines = [f"{len(self.placeholders)} {self.kind} layers substituted "
                 f"({self.baseline_flops / 1e6:.2f} MFLOPs), {len(self.skipped)} left alone"]
        for (name, p), f in zip(self.placeholders, self.layer_flops):
            lines.append(f"  + {name}: {p.mapping} ({f / 1e6:.2f} MFLOPs)")
        for name, reason in self.skipped:
            lines.append(f"  - {name}: {reason}")
        return "\n".join(lines)


def install_placeholders(model: nn.Module, choice: Choice, measures: Measures, space: OperatorSpace) -> Substitution:
    """Puts a Placeholder in every place holding a chosen layer; the Substitution describing it all."""
    placeholders: list[tuple[str, Placeholder]] = []
    for c, mapping in zip(choice.chosen, measures.mappings):
        p = Placeholder(mapping, c.layer, kind=choice.kind)
        p.input_shape, p.output_shape = c.in_shape, c.out_shape
        for parent, attr in c.site.holders:
            setattr(parent, attr, p)
        placeholders.append((c.site.name, p))
    sites = {c.site.name: list(c.site.holders) for c in choice.chosen}
    return Substitution(model, placeholders, list(choice.skipped), space, choice.kind, list(measures.flops), sites,
                        layer_costs=list(measures.costs))
