"""Placeholders and automatic layer substitution: the package's public face.

A :class:`Placeholder` is an ``nn.Module`` slot. Until an operator module is set it runs the layer it stands
for (``referred_layer``), so a model with placeholders behaves exactly like the original one; once
``set_operator(module)`` is called it runs the synthesized operator instead.

Two ways to get placeholders into a model:

* **Automatic** -- :func:`substitute` finds the ``nn.Conv2d`` or ``nn.Linear`` layers of a model, runs one real
  forward pass on ``example_input`` (hooks record every layer's input/output sizes), wraps each layer that can
  be substituted in a Placeholder, and builds the :class:`~syno_automl.space.OperatorSpace` with one mapping
  per placeholder::

      sub = substitute(model, nn.Conv2d, example_input=torch.randn(8, 3, 32, 32), flops_ratio=0.5)
      op = sub.space.sample(1, seed=0)[0]
      sub.apply(op)        # every placeholder now runs op, with its own weights
      sub.restore()        # the original layers are back, untouched

* **By hand**, as in the paper's README: put ``Placeholder({"H": 32, "W": 32})`` slots in a model, build the
  space with :func:`space_for` and fill them with :func:`install`::

      space = space_for(net, "[H, W]", "[H, W]", ["H: 2", "W: 2"], ["s_1=2: 2", "s_2=3: 2"])
      install(net, space.sample(1)[0])

The modules: ``slot.py`` (the :class:`Placeholder` module), ``hand_placed.py`` (:func:`placeholders`,
:func:`record_shapes`, :func:`space_for`, :func:`install`), ``layers.py`` (the layers :func:`substitute` can
replace: default specs, FLOPs and cost, why a layer is left alone), ``substitution.py`` (:func:`substitute` and
the conventions it follows) and its steps: ``sites.py`` (find the candidate layers, observe one forward pass,
choose), ``space_spec.py`` (the space's spec; each layer's mapping, FLOPs and cost), ``budgets.py`` (the ratios as
budgets, the space's options), ``empty_space.py`` (``check=True``: budgets that leave no operator are refused) and
``result.py`` (its result :class:`Substitution`, and the placeholders put in).
"""
from __future__ import annotations

from syno_automl.placeholder.hand_placed import install, placeholders, record_shapes, space_for
from syno_automl.placeholder.layers import DEFAULTS, GROUPED_FLOPS_RATIO, layer_cost, layer_flops
from syno_automl.placeholder.slot import Placeholder
from syno_automl.placeholder.substitution import Substitution, call_with, substitute

__all__ = ["Placeholder", "Substitution", "substitute", "placeholders", "space_for", "install",
           "layer_flops", "DEFAULTS",
           "record_shapes", "layer_cost", "call_with", "GROUPED_FLOPS_RATIO"]
