"""Automatic layer substitution: :func:`substitute` and its result, :class:`Substitution`.

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
"""
from __future__ import annotations

import copy
import fnmatch
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from syno_automl import _native, known
from syno_automl.cost_profile import CostProfile
from syno_automl.cost_profile import resolve as resolve_profile
from syno_automl.echo import shown
from syno_automl.errors import EmptySpaceError, NothingSampledWarning, OperatorFormatError, SubstitutionError, SynoError
from syno_automl.placeholder.layers import (
    DEFAULTS,
    GROUPED_FLOPS_RATIO,
    KINDS,
    conv_reason,
    kind_of,
    layer_cost,
    layer_flops,
    supported_types,
)
from syno_automl.placeholder.slot import Placeholder
from syno_automl.priors import FLOPS_FLOOR, prior_options
from syno_automl.priors import resolve as resolve_priors
from syno_automl.space import Operator, OperatorSpace

__all__ = ["Substitution", "substitute", "call_with"]


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
        return sum(op.cost(self.mapping_for(op, i))["total"] for i in range(len(self.placeholders)))

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


def _where(where: Any) -> Callable[[str, nn.Module], bool]:
    if where is None:
        return lambda name, module: True
    if callable(where):
        return lambda name, module: bool(where(name, module))
    patterns = [where] if isinstance(where, str) else list(where)
    if not all(isinstance(p, str) for p in patterns):
        raise SubstitutionError("where must be a callable (name, module) -> bool, a glob or a list of globs")
    return lambda name, module: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _spec_names(specs: Iterable[str]) -> set[str]:
    return {_native.parse_spec(s)["name"] for s in specs}


def call_with(model: nn.Module, example_input: Any) -> Any:
    """``model`` called on one example batch: a dict as kwargs, a tuple/list as positional args, else one arg."""
    if isinstance(example_input, Mapping):
        return model(**example_input)
    if isinstance(example_input, (tuple, list)):
        return model(*example_input)
    return model(example_input)


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
    cost_ratio: float | None = 1.0,
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
            ``max_cost``): operators that cannot run about as fast as the layers are not in the space. 1.0 by
            default (as the CLI's ``--cost-ratio``): no slower than the replaced layers; ``None`` turns it off.
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
            the space holds one); else one sample of ``CHECK_ATTEMPTS`` descents decides (``CHECK_ATTEMPTS_NAMED``,
            about 2 s, where a layer shuts the known forms out that fit the others). False skips it (an operator
            is at hand, or the caller checks the space itself).
        space_options: other :class:`OperatorSpace` options (``max_params``, ``min_weights``...).

    Raises:
        SubstitutionError: unsupported layer type, no layer of the types found, nothing substitutable, or
            layers of two kinds to substitute.
        EmptySpaceError: (``check``) the budgets leave no operator: proven by the core's bounds, or none found
            in one sample; the message names the layers that shut out what the others admit (a 3-channel stem).
        CostProfileError: ``target`` names no shipped profile or a file that is not a valid one.
    """
    profile = resolve_profile(target)
    rules = _Rules(supported_types(layer_types), _where(where), kernel_sizes, groups)
    if example_input is None:
        raise SubstitutionError("substitute() needs an example_input to record the layers' sizes")
    sites = _find_sites(model, rules.types)
    seen = _observe(model, sites, example_input)
    choice = _choose(sites, seen, rules)
    space_spec = _space_spec(choice, spec, primary, coefficients, groups)
    measures = _measure(choice, space_spec, profile)
    asked = _Asked(flops_ratio, min_flops_ratio, cost_ratio, priors, space_options)
    settled = _settle_budgets(choice, space_spec, measures, asked)
    options: dict[str, Any] = {**settled.budgets, **settled.options}
    space = OperatorSpace(space_spec.input_shape, space_spec.output_shape, list(space_spec.primary),
                          list(space_spec.coefficients), list(measures.mappings), max_depth=max_depth, seed=seed,
                          cost_profile=profile, **options)
    if check:
        _check_holds_operators(space, choice, measures)
    # the layers are wrapped only now: a failure above leaves the model untouched
    sub = _install(model, choice, measures, space)
    sub.layer_types = rules.types
    sub.options = {"where": where, "spec": spec, "primary": primary, "coefficients": coefficients,
                   "max_depth": max_depth, "flops_ratio": flops_ratio, "min_flops_ratio": min_flops_ratio,
                   "cost_ratio": cost_ratio, "target": profile, "kernel_sizes": kernel_sizes, "groups": groups,
                   "seed": seed, "priors": priors, **space_options}
    return sub


# -- the steps of substitute(), and the records they pass on ---------------------------------------------

_Shape = tuple[int, ...]
_Call = tuple[_Shape, _Shape]  # one forward call of a layer: (input sizes, output sizes)


@dataclass(frozen=True)
class _Rules:
    """Which layers may be substituted: their types, the ``where`` filter and the convs' options."""

    types: tuple[type, ...]
    select: Callable[[str, nn.Module], bool]
    kernel_sizes: Sequence[int] | None
    groups: bool


@dataclass(frozen=True)
class _Site:
    """A candidate layer under its first qualified name, with every (parent, attribute) holding it."""

    name: str
    layer: nn.Module
    holders: tuple[tuple[nn.Module, str], ...]


@dataclass(frozen=True)
class _Seen:
    """What the model showed: each candidate's forward calls and each parameter's owners (both by ``id``)."""

    calls: dict[int, tuple[_Call, ...]]
    owners: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class _Chosen:
    """A layer to substitute, with the sizes of its (one) call."""

    site: _Site
    in_shape: _Shape
    out_shape: _Shape

    @property
    def layer(self) -> nn.Module:
        return self.site.layer


@dataclass(frozen=True)
class _Choice:
    """The layers to substitute (all of one kind) and those left alone, with why."""

    kind: str
    chosen: tuple[_Chosen, ...]
    skipped: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _SpaceSpec:
    """The space's spec: its shapes, its variable specs, the variables they name and the common ``g``."""

    input_shape: str
    output_shape: str
    primary: tuple[str, ...]
    coefficients: tuple[str, ...]
    names: frozenset[str]
    common_g: int


@dataclass(frozen=True)
class _Measures:
    """Per chosen layer: its mapping, FLOPs and cost (in the units of ``Operator.cost``)."""

    mappings: tuple[dict[str, int], ...]
    flops: tuple[int, ...]
    costs: tuple[float, ...]


@dataclass(frozen=True)
class _Asked:
    """The budget arguments as given to substitute()."""

    flops_ratio: float | None
    min_flops_ratio: float | None
    cost_ratio: float | None
    priors: bool | Sequence[str]
    options: Mapping[str, Any]


@dataclass(frozen=True)
class _Settled:
    """The space's budgets (``max_flops``, ``min_flops``, ``max_cost``) and its other options."""

    budgets: dict[str, float]
    options: dict[str, Any]


def _find_sites(model: nn.Module, types: tuple[type, ...]) -> tuple[_Site, ...]:
    """Every layer of `types` in the model, in registration order (a module may be registered twice)."""
    if isinstance(model, types):
        raise SubstitutionError("the model itself is a layer to substitute: wrap it in a container module")
    named: dict[int, tuple[str, nn.Module]] = {}
    holders: dict[int, list[tuple[nn.Module, str]]] = {}
    for parent_name, parent in model.named_modules(remove_duplicate=False):
        for attr, child in parent._modules.items():
            if child is None or not isinstance(child, types) or isinstance(child, Placeholder):
                continue
            named.setdefault(id(child), (f"{parent_name}.{attr}" if parent_name else attr, child))
            held = holders.setdefault(id(child), [])
            if (parent, attr) not in held:
                held.append((parent, attr))
    if not named:
        raise SubstitutionError(f"no {' / '.join(t.__name__ for t in types)} layer in the model")
    return tuple(_Site(name, layer, tuple(holders[key])) for key, (name, layer) in named.items())


def _observe(model: nn.Module, sites: tuple[_Site, ...], example_input: Any) -> _Seen:
    # the owners are read before the forward pass, which might register new parameters
    owners = _parameter_owners(model)
    return _Seen(_record_calls(model, sites, example_input), owners)


def _parameter_owners(model: nn.Module) -> dict[int, tuple[str, ...]]:
    """The modules registering each parameter (more than one: tied weights)."""
    owners: dict[int, list[str]] = {}
    for module_name, module in model.named_modules():
        for _, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append(module_name)
    return {key: tuple(names) for key, names in owners.items()}


def _record_calls(model: nn.Module, sites: tuple[_Site, ...], example_input: Any) -> dict[int, tuple[_Call, ...]]:
    """One real forward pass (no grad, eval mode, training flags restored) recording each site's sizes."""
    records: dict[int, list[_Call]] = {id(site.layer): [] for site in sites}

    def hook(module: nn.Module, args: tuple, output: Any) -> None:
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and isinstance(output, torch.Tensor):
            records[id(module)].append((tuple(x.shape), tuple(output.shape)))

    handles = [site.layer.register_forward_hook(hook) for site in sites]
    modes = {m: m.training for m in model.modules()}
    try:
        model.eval()
        with torch.no_grad():
            call_with(model, example_input)
    finally:
        for h in handles:
            h.remove()
        for m, mode in modes.items():
            m.training = mode
    return {key: tuple(calls) for key, calls in records.items()}


def _skip_reason(site: _Site, seen: _Seen, rules: _Rules) -> str | None:
    """Why the layer is left alone (None: it is substituted)."""
    if not rules.select(site.name, site.layer):
        return "excluded by where"
    calls = seen.calls[id(site.layer)]
    if not calls:
        return "not called during the forward pass"
    if len(set(calls)) > 1:
        return f"called with different sizes {sorted(set(r[0] for r in calls))}"
    shared = sorted({o for p in site.layer.parameters() for o in seen.owners.get(id(p), ()) if o != site.name})
    if shared:  # replacing the layer would silently untie the weights
        return f"weight shared with {', '.join(shared)} (tied weights)"
    in_shape, out_shape = calls[0]
    if kind_of(site.layer).conv:
        return conv_reason(site.layer, in_shape, out_shape, rules.kernel_sizes, rules.groups)
    return "0-d input" if len(in_shape) == 0 else None


def _choose(sites: tuple[_Site, ...], seen: _Seen, rules: _Rules) -> _Choice:
    chosen: list[_Chosen] = []
    skipped: list[tuple[str, str]] = []
    for site in sites:
        reason = _skip_reason(site, seen, rules)
        if reason is not None:
            skipped.append((site.name, reason))
        else:
            chosen.append(_Chosen(site, *seen.calls[id(site.layer)][0]))
    if not chosen:
        details = "; ".join(f"{n}: {r}" for n, r in skipped)
        raise SubstitutionError(f"no layer can be substituted ({details})")
    kinds = sorted({kind_of(c.layer).name for c in chosen})
    if len(kinds) > 1:
        named = " and ".join(KINDS[k].layer_type.__name__ for k in kinds)
        raise SubstitutionError(f"both {named} layers would be substituted, but one space has one spec: call "
                                f"substitute() once per layer type (or narrow it with where=...)")
    return _Choice(kinds[0], tuple(chosen), tuple(skipped))


def _space_spec(choice: _Choice, spec: tuple[str, str] | None, primary: Sequence[str] | None,
            coefficients: Sequence[str] | None, groups: bool) -> _SpaceSpec:
    """The space's shapes and variable specs: those given, else the kind's defaults (``k``, ``g`` filled in)."""
    d_in, d_out, d_primary, _ = DEFAULTS[choice.kind]
    input_shape, output_shape = spec if spec is not None else (d_in, d_out)
    d_coefficients, common_g = _default_coefficients(choice, groups)
    primary = list(d_primary if primary is None else primary)
    coefficients = list(d_coefficients if coefficients is None else coefficients)
    names = _spec_names(primary) | _spec_names(coefficients)
    return _SpaceSpec(input_shape, output_shape, tuple(primary), tuple(coefficients), frozenset(names), common_g)


def _default_coefficients(choice: _Choice, groups: bool) -> tuple[list[str], int]:
    """The kind's default coefficients with the layers' most common ``k`` (and ``g``), and that ``g`` (else 1)."""
    d_coefficients = DEFAULTS[choice.kind][3]
    if not KINDS[choice.kind].conv:
        return d_coefficients, 1
    common_k = Counter(c.layer.kernel_size[0] for c in choice.chosen).most_common(1)[0][0]
    d_coefficients = [c.format(k=common_k) for c in d_coefficients]
    gs = [c.layer.groups for c in choice.chosen if 1 < c.layer.groups < c.layer.in_channels] if groups else []
    if not gs:
        return d_coefficients, 1
    # g occurs twice in a grouped conv (REDUCE g^-1*C_in, MERGE [g, g^-1*C_out]): with ': 1' the layers' own
    # operator would be out of the space
    common_g = Counter(gs).most_common(1)[0][0]
    return d_coefficients + [f"g={common_g}: 2"], common_g


def _mapping_of(kind: str, chosen: _Chosen, space_spec: _SpaceSpec) -> dict[str, int]:
    """The layer's values of the variables the space names."""
    layer, in_shape, out_shape = chosen.layer, chosen.in_shape, chosen.out_shape
    spatial = KINDS[kind].spatial
    if spatial:
        # g: the layer's groups where it is grouped, else the common one (a coefficient must fit every mapping;
        # g=1 or g=C_in would shut every g-dependent operator out of a space mixing layers)
        g = layer.groups if 1 < layer.groups < layer.in_channels else space_spec.common_g
        full = {"N": in_shape[0], "C_in": in_shape[1], "C_out": out_shape[1], **dict(zip(spatial, in_shape[2:])),
                "k": layer.kernel_size[0], "g": g}
    else:
        full = {"N": math.prod(in_shape[:-1]), "C_in": in_shape[-1], "C_out": out_shape[-1]}
    return {k: v for k, v in full.items() if k in space_spec.names}


def _measure(choice: _Choice, space_spec: _SpaceSpec, profile: CostProfile | None) -> _Measures:
    """Each chosen layer's mapping, FLOPs and cost (priced by `profile`)."""
    mappings, flops, costs = [], [], []
    for c in choice.chosen:
        mappings.append(_mapping_of(choice.kind, c, space_spec))
        flops.append(layer_flops(c.layer, c.in_shape, c.out_shape))
        costs.append(layer_cost(flops[-1], c.out_shape, c.layer.weight.numel(), input_shape=c.in_shape,
                                profile=profile))
    return _Measures(tuple(mappings), tuple(flops), tuple(costs))


def _settle_budgets(choice: _Choice, space_spec: _SpaceSpec, measures: _Measures, asked: _Asked) -> _Settled:
    """The space's budgets (ratios times the replaced layers' FLOPs / cost) and options (the priors', those given,
    a relaxed unfold ratio); a budget given both as a ratio and as an option is an error."""
    flops_ratio = _flops_ratio(choice, asked)
    prior_names = resolve_priors(asked.priors)
    min_flops_ratio = asked.min_flops_ratio
    if ("flops_floor" in prior_names and min_flops_ratio is None and "min_flops" not in asked.options
            and (flops_ratio is None or flops_ratio > FLOPS_FLOOR)):  # a floor above the ceiling would empty it
        min_flops_ratio = FLOPS_FLOOR
    options = {**_prior_options(choice, space_spec, prior_names), **asked.options}
    budgets = _budgets(flops_ratio, min_flops_ratio, asked.cost_ratio, measures)
    options = _relaxed_unfold(choice, options)
    for k in budgets:
        if k in options:
            raise SubstitutionError(f"give either {k} or the ratio, not both")
    return _Settled(budgets, options)


def _flops_ratio(choice: _Choice, asked: _Asked) -> float | None:
    """`flops_ratio` as given, or GROUPED_FLOPS_RATIO where grouped convs are replaced and no FLOPs budget is."""
    if (KINDS[choice.kind].conv and asked.flops_ratio is None and "max_flops" not in asked.options
            and any(c.layer.groups > 1 for c in choice.chosen)):
        # a dense [N, C_in, ...] -> [N, C_out, ...] operator in place of a depthwise (or grouped) conv costs up to
        # C_in (g) times the layer: unless asked otherwise, operators may cost what the replaced layers cost
        return GROUPED_FLOPS_RATIO
    return asked.flops_ratio


def _prior_options(choice: _Choice, space_spec: _SpaceSpec, prior_names: tuple[str, ...]) -> dict[str, Any]:
    """The priors' OperatorSpace options, fitted to the replaced layers."""
    input_names = [d["factors"][0][0] if len(d["factors"]) == 1 else ""
                   for d in _native.parse_shape(space_spec.input_shape)]
    kind = KINDS[choice.kind]
    depthwise = kind.conv and any(1 < c.layer.groups == c.layer.in_channels for c in choice.chosen)
    return prior_options(prior_names,
                         channel_input=input_names.index("C_in") if "C_in" in input_names else None,
                         widest_output=max(c.out_shape[kind.channel_dim] for c in choice.chosen),
                         depthwise=depthwise)


def _budgets(flops_ratio: float | None, min_flops_ratio: float | None, cost_ratio: float | None,
             measures: _Measures) -> dict[str, float]:
    """The ratios as absolute budgets, relative to the replaced layers' FLOPs / cost summed."""
    baseline = sum(measures.flops)
    budgets: dict[str, float] = {}
    if flops_ratio is not None:
        budgets["max_flops"] = float(flops_ratio) * baseline
    if min_flops_ratio is not None:
        budgets["min_flops"] = float(min_flops_ratio) * baseline
    if cost_ratio is not None:
        if not (cost_ratio > 0 and math.isfinite(cost_ratio)):
            raise SubstitutionError(f"cost_ratio must be a positive number, got {shown(cost_ratio)}")
        budgets["max_cost"] = float(cost_ratio) * sum(measures.costs)
    return budgets


def _relaxed_unfold(choice: _Choice, options: dict[str, Any]) -> dict[str, Any]:
    """`options` with ``min_unfold_ratio`` lowered, if need be, for the replaced convs' own windows to fit."""
    if not KINDS[choice.kind].conv or "min_unfold_ratio" in options:
        return options
    # the core's default (an unfold's main dim at least `ratio` times its window, in every mapping) may shut the
    # conv-equivalent operator out of the space when a layer is small (ResNet-18's 4x4 stage on CIFAR): relax
    # it just enough for the replaced layers' own k x k windows to fit (never raise it)
    default = _native.default_options()["min_unfold_ratio"]
    fit = min(min(c.in_shape[2:]) / c.layer.kernel_size[0] for c in choice.chosen)
    return {**options, "min_unfold_ratio": fit} if fit < default else options


#: the sample that looks for an operator where no known form of the layer (known.opening's grouped forms, the layer
#: itself) within the budgets witnesses one (check=True): attempts as sample()'s default, fewer where a layer is found
#: to shut the known forms out (the space is then most likely empty, and that layer is named). Counted in attempts,
#: so that the verdict does not depend on the machine's load; the time limit is a safety net (reached, no refusal)
CHECK_ATTEMPTS = 1_000
CHECK_ATTEMPTS_NAMED = 200
CHECK_SECONDS = 60.0


def _check_holds_operators(space: OperatorSpace, choice: _Choice, measures: _Measures) -> None:
    """Raises EmptySpaceError when the budgets leave the space without an operator, naming the layers that make it
    so. Immediate where the space holds a known form of the layer within the budgets."""
    if not space.budgets:
        return
    ratios = _ratios(space.budgets, measures)
    if space._budget_conflict:  # proven by the core's bounds
        layers = ", ".join(c.site.name for c in choice.chosen)
        raise EmptySpaceError(f"{space._budget_conflict}, over the layers {layers} ({ratios}); {_EMPTY_HINT}")
    if _known_forms(space, choice.kind):
        return
    blamed = _shutting_out(space, choice, measures)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingSampledWarning)
        try:
            if space.sample(1, seed=space.seed, max_attempts=CHECK_ATTEMPTS_NAMED if blamed else CHECK_ATTEMPTS,
                            time_limit=CHECK_SECONDS):
                return
        except EmptySpaceError:
            pass
    report = space.last_report
    if report.stop_reason == "time":
        return  # not seen through: the trials' sampling will tell
    head = (f"the budgets ({ratios}) leave no operator for these layers: none in {report.attempts} descents "
            f"({report.seconds:.1f} s), and no grouped form of the layer nor the layer itself fits them")
    if blamed:
        named = "; ".join(f"{_described(choice.kind, group)} shuts out the {form}, which fits the other layers' "
                          f"share of the budgets" for group, form in blamed)
        names = ", ".join(repr(c.site.name) for group, _ in blamed for c in group)
        raise EmptySpaceError(f"{head}: {named}. Leave it out with where=lambda name, m: name not in ({names},) (the "
                              f"CLI keeps a stem that reads the image), or {_EMPTY_HINT}")
    raise EmptySpaceError(f"{head}; {_EMPTY_HINT}")


_EMPTY_HINT = ("raise flops_ratio / cost_ratio (cost_ratio=None turns the cost budget off) or max_depth; check=False "
               "skips this check")


def _ratios(budgets: Mapping[str, float], measures: _Measures) -> str:
    """The budgets as substitute() takes them: ratios to the replaced layers' FLOPs / cost, the others as given."""
    flops, cost = sum(measures.flops), sum(measures.costs)
    shown_as = {"max_flops": ("flops_ratio", flops), "min_flops": ("min_flops_ratio", flops),
                "max_cost": ("cost_ratio", cost)}
    parts = []
    for k, v in budgets.items():
        name, per = shown_as.get(k, (k, 0))
        parts.append(f"{name}={v / per:.4g}" if per else f"{k}={v:.4g}")
    return ", ".join(parts)


def _known_forms(space: OperatorSpace, kind: str) -> list[str]:
    """The labels of the known forms of the layer the space holds within its budgets (the walks obey them): the
    grouped forms (known.opening), else the layer itself; each one proves the space is not empty."""
    found = [label for label, _ in known.opening(space)]
    if found:
        return found
    for label, form in _LAYER_FORMS[kind]:
        try:
            form(space)
        except OperatorFormatError:
            continue
        return [label]
    return []


#: the replaced layer itself, as known forms, by kind (a kernel-1 Conv1d is the pointwise one)
_LAYER_FORMS: dict[str, tuple[tuple[str, Callable[[OperatorSpace], Operator]], ...]] = {
    "conv1d": (("conv1d", known.conv1d), ("pointwise conv1d", known.pointwise_conv1d)),
    "conv2d": (("conv2d", known.conv2d),), "linear": (("linear", known.linear),)}


def _described(kind: str, group: Sequence[_Chosen]) -> str:
    """``stem.0 (3 -> 32 channels, 16x16)``: the layers of one mapping, their sizes."""
    first, layer_kind = group[0], KINDS[kind]
    c = layer_kind.channel_dim
    sizes = f"{first.in_shape[c]} -> {first.out_shape[c]} channels"
    if layer_kind.conv:
        sizes += f", {layer_kind.sizes_text(first.in_shape)}"
    return f"{', '.join(c.site.name for c in group)} ({sizes})"


def _shutting_out(space: OperatorSpace, choice: _Choice, measures: _Measures) -> list[tuple[list[_Chosen], str]]:
    """The layers (grouped by mapping) without which a known form of the layer fits the others' share of the
    budgets, with that form's label: what makes the space empty (a 3-channel stem takes no group of 2)."""
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for i, mapping in enumerate(measures.mappings):
        groups.setdefault(tuple(sorted(mapping.items())), []).append(i)
    if len(groups) < 2:
        return []
    blamed: list[tuple[list[_Chosen], str]] = []
    for left_out in groups.values():
        rest = [i for i in range(len(measures.mappings)) if i not in left_out]
        share = {"flops": sum(measures.flops[i] for i in rest) / max(sum(measures.flops), 1),
                 "cost": sum(measures.costs[i] for i in rest) / max(sum(measures.costs), 1e-300)}
        config = space.config()
        config["mappings"] = [dict(measures.mappings[i]) for i in rest]
        for k, v in space.budgets.items():  # FLOPs and cost budgets are sums over the layers: the others' share
            config[k] = v * share["cost"] if k == "max_cost" else v * share["flops"] if "flops" in k else v
        try:
            forms = _known_forms(OperatorSpace(**config, seed=space.seed, threads=space.threads), choice.kind)
        except SynoError:  # a diagnosis only: a space that cannot be built blames nothing
            continue
        if forms:  # "grouped conv2d, s groups" -> "grouped conv2d (s groups)"
            label, _, groups_of = forms[0].partition(", ")
            blamed.append(([choice.chosen[i] for i in left_out], f"{label} ({groups_of})" if groups_of else label))
    return blamed


def _install(model: nn.Module, choice: _Choice, measures: _Measures, space: OperatorSpace) -> Substitution:
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
