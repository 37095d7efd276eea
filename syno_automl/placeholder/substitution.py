"""Automatic layer substitution: :func:`substitute`, the entry point, and the conventions it follows.

:func:`substitute` finds the ``nn.Conv2d``, ``nn.Conv1d`` or ``nn.Linear`` layers of a model, runs one real forward
pass on ``example_input`` (hooks record every layer's input/output sizes), wraps each layer that can be substituted in a
Placeholder, and builds the :class:`~syno_automl.space.OperatorSpace` with one mapping per placeholder::

    sub = substitute(model, nn.Conv2d, example_input=torch.randn(8, 3, 32, 32), flops_ratio=0.5)
    op = sub.space.sample(1, seed=0)[0]
    sub.apply(op)        # every placeholder now runs op, with its own weights
    sub.restore()        # the original layers are back, untouched

Conventions (choices made here):

* **Conv2d** layers map to the spec ``[N, C_in, H, W] -> [N, C_out, H, W]`` (default primary
  ``["N: 0", "C_in: 2", "C_out: 2", "H: 2", "W: 2"]``, coefficients ``["k=<k>: 2", "s=2: 2"]``). A layer is
  substituted only if it keeps the spatial size: stride 1, dilation 1, zero padding equal to ``k // 2`` with a
  square odd kernel ``k`` in ``kernel_sizes`` (default ``(3,)``, the paper's 3x3 convolutions; ``None``
  accepts every odd square kernel, and each mapping then carries its own ``k``), ``groups == 1`` unless
  ``groups=True`` (each mapping then carries ``g``, the layer's group count, if ``g`` is a coefficient; the
  default coefficient is ``g=<most common groups>: 2``, so the grouped conv itself is in the space, and a layer
  that is not grouped carries that common ``g``). With grouped or depthwise layers and no ``flops_ratio`` (nor
  ``max_flops``), ``flops_ratio`` defaults to ``GROUPED_FLOPS_RATIO`` (1.0): a dense operator in place of a
  depthwise conv would otherwise cost up to ``C_in`` times the layer.
  ``N`` (the batch) is a free dim of the generated module: it works for any batch size.
* **Conv1d** layers (time series, audio, genomics) map to ``[N, C_in, L] -> [N, C_out, L]`` (default primary
  ``["N: 0", "C_in: 2", "C_out: 2", "L: 2"]``, coefficients ``["k=<k>: 2", "s=2: 2"]``), under the same rules as
  Conv2d (stride 1, dilation 1, same zero padding, an odd kernel in ``kernel_sizes``, ``groups``); each kind's spec
  is a :class:`~syno_automl.placeholder.layers.LayerKind` of ``layers.KINDS``.
* **Linear** layers map to ``[N, C_in] -> [N, C_out]`` (default primary ``["N: 0", "C_in: 2", "C_out: 2"]``,
  coefficients ``["k=3: 2", "s=2: 2"]``): all leading dims are flattened into ``N`` (``x.reshape(-1, C_in)``
  and back), so GPT's QKV ``[B, T, d] -> [B, T, 3d]`` is an operator over tokens ``N = B*T``. Flattening keeps
  tokens independent (an operator cannot mix time steps, which would break the causal mask) and keeps the
  sequence length free at run time.
* **Bias**: a replaced layer that had a bias gets a fresh learnable bias (zeros, one per output channel) added
  after the operator (``bias=False`` drops it). The bias is not counted in FLOPs, as in the IR's convention.
* **Unfold ratio**: for a conv, unless ``min_unfold_ratio`` is given, it is lowered from the core's default
  (``_native.default_options()``, 1.0) to the smallest ``min(H, W) / k`` (``L / k``) of the replaced layers when that is
  smaller (never raised), so that the conv-equivalent
  operator (the layers being replaced) stays inside the space even with small feature maps (4x4 in ResNet-18
  on CIFAR).
* **FLOPs** follow the IR's convention (2 x multiply-accumulates; bias adds not counted). ``flops_ratio`` and
  ``min_flops_ratio`` bound the operator's FLOPs *summed over all placeholders* relative to the replaced
  layers' FLOPs summed (both at the example's batch size, so the ratio does not depend on it).
* Layers whose weight is shared with another module (tied weights, e.g. GPT's LM head) are left alone, since
  replacing them would silently untie the weights; a layer called more than once with different input sizes
  or never called is left alone too. Every layer of the requested types that is not substituted is listed in
  ``sub.skipped`` with its reason, including those excluded by ``where``.

Each step of :func:`substitute` is a module of its own (``sites``, ``space_spec``, ``budgets``, ``empty_space``,
``result``: the package's docstring says which does what); ``Substitution`` and ``call_with`` are re-exported here.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from torch import nn

from syno_automl.cost_profile import resolve as resolve_profile
from syno_automl.errors import SubstitutionError
from syno_automl.placeholder.budgets import Asked, settle_budgets
from syno_automl.placeholder.empty_space import check_holds_operators
from syno_automl.placeholder.layers import supported_types
from syno_automl.placeholder.result import Substitution, install_placeholders
from syno_automl.placeholder.sites import Rules, call_with, choose, find_sites, observe, where_filter
from syno_automl.placeholder.space_spec import measure, space_spec_for
from syno_automl.space import OperatorSpace

__all__ = ["Substitution", "substitute", "call_with", "COST_RATIO_BY_KIND"]

#: substitute's cost budget by the replaced layers' kind (``cost_ratio="auto"``, the default): the CLI's defaults
#: (settings.py ``cost_ratio``: 1.0; 2.0 for MNIST-1D, whose layers are Conv1d: a 3-tap Conv1d's planned cost is
#: mostly the elements it writes, so at 1.0 only its known forms fit and a study ends within its first trials)
COST_RATIO_BY_KIND = {"conv2d": 1.0, "conv1d": 2.0, "linear": 1.0}


def substitute(
    model: nn.Module,
    layer_types: type | Sequence[type],
    example_input: Any,
    *,
    where: Callable[[str, nn.Module], bool] | str | Sequence[str] | None = None,
    spec: tuple[str, str] | None = None,
    primary: Sequence[str] | None = None,
    coefficients: Sequence[str] | None = None,
    max_depth: int = 8,
    flops_ratio: float | None = None,
    min_flops_ratio: float | None = None,
    cost_ratio: float | None | Literal["auto"] = "auto",
    target: Any = None,
    kernel_sizes: Sequence[int] | None = (3,),
    groups: bool = False,
    seed: int = 0,
    priors: bool | Sequence[str] = True,
    check: bool = True,
    **space_options: Any,
) -> Substitution:
    """Replaces the model's ``nn.Conv2d`` (``nn.Conv1d``, ``nn.Linear``) layers by Placeholders and builds their space.

    Args:
        model: modified in place (the substituted layers become Placeholders that still run the originals).
        layer_types: ``nn.Conv2d``, ``nn.Conv1d``, ``nn.Linear`` or a tuple of them (the layers substituted must
            all be of one kind: one space has one spec).
        example_input: one batch for the model: a tensor, a tuple of positional args or a dict of kwargs.
            One forward pass runs on it (no grad, eval mode, training flags restored) to record sizes.
        where: which layers to consider: a predicate ``(qualified name, module) -> bool``, a glob on the
            qualified name (``"*.qkv"``) or a list of globs.
        spec: ``(input_shape, output_shape)`` replacing the default spec (same variable names).
        primary, coefficients: variable specs; defaults in ``DEFAULTS`` (``k`` is the layers' kernel size).
        max_depth: of the space.
        flops_ratio / min_flops_ratio: bounds on the operator's FLOPs summed over all placeholders, relative
            to the replaced layers' FLOPs summed (the space's ``max_flops`` / ``min_flops``).
        cost_ratio: bound on the operator's planned cost (``Operator.cost``: FLOPs computed plus elements
            materialized) summed over all placeholders, relative to the replaced layers' cost (the space's
            ``max_cost``): operators that cannot run about as fast as the layers are not in the space. ``"auto"``
            (the default): the CLI's default for the layers' kind (``COST_RATIO_BY_KIND``: 1.0, no slower than the
            replaced layers; 2.0 for ``nn.Conv1d``, as ``--dataset mnist1d``); ``None`` turns it off.
        target: the speed target whose cost profile prices that cost and the space's cost pruning
            (syno_automl.cost_profile: ``"cpu.eager"``, ``"cuda.eager"``, ``"cuda.compiled"``, a profile file
            written by ``calibrate``, or a CostProfile); None: today's cost (the cpu.eager profile).
        kernel_sizes: Conv1d / Conv2d kernel sizes to substitute (None: every odd (square) kernel; each mapping
            then holds its layer's ``k``).
        groups: also substitute grouped/depthwise convolutions (each mapping holds its layer's ``g`` if
            ``g`` is a coefficient).
        seed: the space's default sampling seed.
        priors: the space priors (:mod:`syno_automl.priors`): True for its ``DEFAULT_PRIORS``, False for none, or
            a list of prior names. The FLOPs floor sets ``min_flops_ratio`` when it is not given; options given
            in ``space_options`` win over the priors'.
        check: refuse budgets that leave the space without an operator here, naming the layers that make it so
            (EmptySpaceError), rather than in the first trial's sampling. Immediate where a known form of the
            replaced layer fits the budgets (a grouped form, ``known.opening``, or the layer itself: it proves
            the space holds one); else one sample of ``empty_space.CHECK_ATTEMPTS`` descents decides
            (``CHECK_ATTEMPTS_NAMED``, about 2 s, where a layer shuts the known forms out that fit the others).
            False skips it (an operator is at hand, or the caller checks the space itself). It warns
            (KnownFormsOnlyWarning) when the budgets hold the layer's known forms and no other operator is found.
        space_options: other :class:`OperatorSpace` options (``max_params``, ``min_weights``...).

    Raises:
        SubstitutionError: unsupported layer type, no layer of the types found, nothing substitutable, or
            layers of two kinds to substitute.
        EmptySpaceError: (``check``) the budgets leave no operator: proven by the core's bounds, or none found
            in one sample; the message names the layers that shut out what the others admit (a 3-channel stem).
        CostProfileError: ``target`` names no shipped profile or a file that is not a valid one.
    """
    profile = resolve_profile(target)
    rules = Rules(supported_types(layer_types), where_filter(where), kernel_sizes, groups)
    if example_input is None:
        raise SubstitutionError("substitute() needs an example_input to record the layers' sizes")
    sites = find_sites(model, rules.types)
    seen = observe(model, sites, example_input)
    choice = choose(sites, seen, rules)
    if isinstance(cost_ratio, str):
        if cost_ratio != "auto":
            raise SubstitutionError(f"cost_ratio must be a positive number, None or 'auto', got {cost_ratio!r}")
        cost_ratio = COST_RATIO_BY_KIND[choice.kind]
    space_spec = space_spec_for(choice, spec, primary, coefficients, groups)
    measures = measure(choice, space_spec, profile)
    asked = Asked(flops_ratio, min_flops_ratio, cost_ratio, priors, space_options)
    settled = settle_budgets(choice, space_spec, measures, asked)
    options: dict[str, Any] = {**settled.budgets, **settled.options}
    space = OperatorSpace(space_spec.input_shape, space_spec.output_shape, list(space_spec.primary),
                          list(space_spec.coefficients), list(measures.mappings), max_depth=max_depth, seed=seed,
                          cost_profile=profile, **options)
    if check:
        check_holds_operators(space, choice, measures)
    # the layers are wrapped only now: a failure above leaves the model untouched
    sub = install_placeholders(model, choice, measures, space)
    sub.layer_types = rules.types
    sub.options = {"where": where, "spec": spec, "primary": primary, "coefficients": coefficients,
                   "max_depth": max_depth, "flops_ratio": flops_ratio, "min_flops_ratio": min_flops_ratio,
                   "cost_ratio": cost_ratio, "target": profile, "kernel_sizes": kernel_sizes, "groups": groups,
                   "seed": seed, "priors": priors, **space_options}
    return sub
