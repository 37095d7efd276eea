"""``substitute(check=True)``: refuse budgets that leave the space without an operator, naming the layers to blame.

Immediate where the core's bounds prove the budgets conflict, or where the space holds a known form of the replaced
layer within them (``known.opening``'s grouped forms, else the layer itself); otherwise one bounded sample decides,
and the layers whose mapping shuts out a form that fits the others' share of the budgets are named
(:func:`check_holds_operators`).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

from syno_automl import known
from syno_automl.errors import EmptySpaceError, NothingSampledWarning, OperatorFormatError, SynoError
from syno_automl.placeholder.layers import KINDS
from syno_automl.placeholder.sites import Choice, Chosen
from syno_automl.placeholder.space_spec import Measures
from syno_automl.space import Operator, OperatorSpace

#: the sample that looks for an operator where no known form of the layer (known.opening's grouped forms, the layer
#: itself) within the budgets witnesses one (check=True): attempts as sample()'s default, fewer where a layer is found
#: to shut the known forms out (the space is then most likely empty, and that layer is named). Counted in attempts,
#: so that the verdict does not depend on the machine's load; the time limit is a safety net (reached, no refusal)
CHECK_ATTEMPTS = 1_000
CHECK_ATTEMPTS_NAMED = 200
CHECK_SECONDS = 60.0
#: where a known form proves the space not empty, how hard the check looks for another operator (else it warns,
#: KnownFormsOnlyWarning): one sample below each of the root's first children within the budgets, in 3 times the
#: descents of a search's first look below a leaf (MCTSLimits.probe_attempts): a warning is worth looking harder for
#: than one leaf. MNIST-1D's Conv1d at cost_ratio=1.0: none below 8 (about 1 s); at 2.0, and Conv2d at 1.0, one below
#: the first (0.01-0.15 s)
PROBE_CHILDREN = 8
PROBE_ATTEMPTS = 48


class KnownFormsOnlyWarning(UserWarning):
    """substitute()'s budgets hold known forms of the layer and no other operator was found: a search has little
    to find and ends (its study stops) within a few trials."""


def check_holds_operators(space: OperatorSpace, choice: Choice, measures: Measures) -> None:
    """Raises EmptySpaceError when the budgets leave the space without an operator, naming the layers that make it
    so. Immediate where the space holds a known form of the layer within the budgets."""
    if not space.budgets:
        return
    ratios = _ratios(space.budgets, measures)
    if space._budget_conflict:  # proven by the core's bounds
        layers = ", ".join(c.site.name for c in choice.chosen)
        raise EmptySpaceError(f"{space._budget_conflict}, over the layers {layers} ({ratios}); {_EMPTY_HINT}")
    forms = _known_forms(space, choice.kind)
    if forms:
        if not _holds_a_new_operator(space):
            warnings.warn(KnownFormsOnlyWarning(
                f"the budgets ({ratios}) hold known forms of the layer ({', '.join(forms)}) but no other operator "
                f"was found below the first {PROBE_CHILDREN} choices: a search would end within a few trials; raise "
                f"cost_ratio (the CLI takes 2.0 for Conv1d) or flops_ratio, or pass cost_ratio=None"), stacklevel=3)
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


def _ratios(budgets: Mapping[str, float], measures: Measures) -> str:
    """The budgets as substitute() takes them: ratios to the replaced layers' FLOPs / cost, the others as given."""
    flops, cost = sum(measures.flops), sum(measures.costs)
    shown_as = {"max_flops": ("flops_ratio", flops), "min_flops": ("min_flops_ratio", flops),
                "max_cost": ("cost_ratio", cost)}
    parts = []
    for k, v in budgets.items():
        name, per = shown_as.get(k, (k, 0))
        parts.append(f"{name}={v / per:.4g}" if per else f"{k}={v:.4g}")
    return ", ".join(parts)


def _holds_a_new_operator(space: OperatorSpace) -> bool:
    """Whether a sample below one of the root's first PROBE_CHILDREN children within the cost budget finds an
    operator that is no known form (known.classify). Bounded by descents: the same answer on any machine."""
    max_cost = space.budgets.get("max_cost", float("inf"))
    children = [c for c in space.root().children() if c.cost_bound <= max_cost][:PROBE_CHILDREN]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingSampledWarning)
        for child in children:
            try:
                ops = [child.to_operator()] if child.is_final else space.sample(
                    1, seed=space.seed, prefix=child, max_attempts=PROBE_ATTEMPTS, time_limit=CHECK_SECONDS)
            except EmptySpaceError:
                continue
            if any(known.classify(op) is None for op in ops):
                return True
    return False


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


def _described(kind: str, group: Sequence[Chosen]) -> str:
    """``stem.0 (3 -> 32 channels, 16x16)``: the layers of one mapping, their sizes."""
    first, layer_kind = group[0], KINDS[kind]
    c = layer_kind.channel_dim
    sizes = f"{first.in_shape[c]} -> {first.out_shape[c]} channels"
    if layer_kind.conv:
        sizes += f", {layer_kind.sizes_text(first.in_shape)}"
    return f"{', '.join(c.site.name for c in group)} ({sizes})"


def _shutting_out(space: OperatorSpace, choice: Choice, measures: Measures) -> list[tuple[list[Chosen], str]]:
    """The layers (grouped by mapping) without which a known form of the layer fits the others' share of the
    budgets, with that form's label: what makes the space empty (a 3-channel stem takes no group of 2)."""
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for i, mapping in enumerate(measures.mappings):
        groups.setdefault(tuple(sorted(mapping.items())), []).append(i)
    if len(groups) < 2:
        return []
    blamed: list[tuple[list[Chosen], str]] = []
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
