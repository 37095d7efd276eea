"""Which layers :func:`~syno_automl.placeholder.substitution.substitute` replaces: find, observe, choose.

Every layer of the requested types is a :class:`Site` (under its first qualified name, with every (parent,
attribute) holding it: :func:`find_sites`); one real forward pass records each site's calls and, before it, each
parameter's owners (:func:`observe`); :func:`choose` keeps the layers that can be substituted (all of one kind) and
lists the others with why (excluded by ``where``, never called, called with different sizes, tied weights, or a conv
that ``layers.conv_reason`` refuses).
"""
from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from syno_automl.errors import SubstitutionError
from syno_automl.placeholder.layers import KINDS, conv_reason, kind_of
from syno_automl.placeholder.slot import Placeholder

Shape = tuple[int, ...]
Call = tuple[Shape, Shape]  # one forward call of a layer: (input sizes, output sizes)


@dataclass(frozen=True)
class Rules:
    """Which layers may be substituted: their types, the ``where`` filter and the convs' options."""

    types: tuple[type, ...]
    select: Callable[[str, nn.Module], bool]
    kernel_sizes: Sequence[int] | None
    groups: bool


@dataclass(frozen=True)
class Site:
    """A candidate layer under its first qualified name, with every (parent, attribute) holding it."""

    name: str
    layer: nn.Module
    holders: tuple[tuple[nn.Module, str], ...]


@dataclass(frozen=True)
class Seen:
    """What the model showed: each candidate's forward calls and each parameter's owners (both by ``id``)."""

    calls: dict[int, tuple[Call, ...]]
    owners: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class Chosen:
    """A layer to substitute, with the sizes of its (one) call."""

    site: Site
    in_shape: Shape
    out_shape: Shape

    @property
    def layer(self) -> nn.Module:
        return self.site.layer


@dataclass(frozen=True)
class Choice:
    """The layers to substitute (all of one kind) and those left alone, with why."""

    kind: str
    chosen: tuple[Chosen, ...]
    skipped: tuple[tuple[str, str], ...]


def where_filter(where: Any) -> Callable[[str, nn.Module], bool]:
    if where is None:
        return lambda name, module: True
    if callable(where):
        return lambda name, module: bool(where(name, module))
    patterns = [where] if isinstance(where, str) else list(where)
    if not all(isinstance(p, str) for p in patterns):
        raise SubstitutionError("where must be a callable (name, module) -> bool, a glob or a list of globs")
    return lambda name, module: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def call_with(model: nn.Module, example_input: Any) -> Any:
    """``model`` called on one example batch: a dict as kwargs, a tuple/list as positional args, else one arg."""
    if isinstance(example_input, Mapping):
        return model(**example_input)
    if isinstance(example_input, (tuple, list)):
        return model(*example_input)
    return model(example_input)


def find_sites(model: nn.Module, types: tuple[type, ...]) -> tuple[Site, ...]:
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
    return tuple(Site(name, layer, tuple(holders[key])) for key, (name, layer) in named.items())


def observe(model: nn.Module, sites: tuple[Site, ...], example_input: Any) -> Seen:
    # the owners are read before the forward pass, which might register new parameters
    owners = _parameter_owners(model)
    return Seen(_record_calls(model, sites, example_input), owners)


def _parameter_owners(model: nn.Module) -> dict[int, tuple[str, ...]]:
    """The modules registering each parameter (more than one: tied weights)."""
    owners: dict[int, list[str]] = {}
    for module_name, module in model.named_modules():
        for _, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append(module_name)
    return {key: tuple(names) for key, names in owners.items()}


def _record_calls(model: nn.Module, sites: tuple[Site, ...], example_input: Any) -> dict[int, tuple[Call, ...]]:
    """One real forward pass (no grad, eval mode, training flags restored) recording each site's sizes."""
    records: dict[int, list[Call]] = {id(site.layer): [] for site in sites}

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


def _skip_reason(site: Site, seen: Seen, rules: Rules) -> str | None:
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


def choose(sites: tuple[Site, ...], seen: Seen, rules: Rules) -> Choice:
    chosen: list[Chosen] = []
    skipped: list[tuple[str, str]] = []
    for site in sites:
        reason = _skip_reason(site, seen, rules)
        if reason is not None:
            skipped.append((site.name, reason))
        else:
            chosen.append(Chosen(site, *seen.calls[id(site.layer)][0]))
    if not chosen:
        details = "; ".join(f"{n}: {r}" for n, r in skipped)
        raise SubstitutionError(f"no layer can be substituted ({details})")
    kinds = sorted({kind_of(c.layer).name for c in chosen})
    if len(kinds) > 1:
        named = " and ".join(KINDS[k].layer_type.__name__ for k in kinds)
        raise SubstitutionError(f"both {named} layers would be substituted, but one space has one spec: call "
                                f"substitute() once per layer type (or narrow it with where=...)")
    return Choice(kinds[0], tuple(chosen), tuple(skipped))
