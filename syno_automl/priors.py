"""Space priors: the original Syno's restrictions on its space, as named options of an OperatorSpace (issue 25).

Each prior is a native option (native/priors.hpp) with a counter in ``space.stats()["rules"]``; it prunes during the
walk only where no completion can satisfy it and is otherwise checked at FINALIZE, so the shape distance and the
budgets stay exact. :func:`prior_options` turns prior names into those options for the spaces ``substitute``
builds; :func:`violations` says which priors an operator breaks.

========================  ==========================================================================================
name                      what it keeps (native option; rule name in the space's stats)
========================  ==========================================================================================
``weight_io``             every weight has an inner SHARE (a data coordinate) and an outer one (``prior_weight_io``;
                          ``weight-shares-input-and-output``)
``outer_kinds``           outer SHAREs feed the output (through MERGEs) or a later weight (low rank), never a view
                          (``prior_outer_kinds``; ``outer-kind``): off by default, it drops 4 of the 12 good
                          operators of the shared data (their outer coordinate is SPLIT or SHIFTed)
``outer_product``         the outer coordinates that are not low rank multiply to <= 2048 (``prior_max_outer``;
                          ``outer-product-limit``), raised to the replaced layers' largest output width
``low_rank``              a low-rank coordinate (made by one weight, contracted by the next) has exactly 8
                          elements (``prior_lowrank_size``; ``low-rank-size``)
``pooling``               reductions with no weight sum <= 8 elements (``prior_max_pooling``;
                          ``unweighted-pooling-limit``)
``flops_floor``           FLOPs >= 0.05 x the replaced layers' (``min_flops``; ``flops-floor``)
``channel_twins``         a channel input is not SPLIT in the interleaved order (``channel_inputs``;
                          ``channel-split-order``): the twin up to a channel permutation stays
========================  ==========================================================================================

Example:
    >>> sorted(prior_options(True, channel_input=1, widest_output=64))  # doctest: +NORMALIZE_WHITESPACE
    ['channel_inputs', 'prior_lowrank_size', 'prior_max_outer', 'prior_max_pooling', 'prior_weight_io']
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from syno_automl.errors import OptionError, OptionTypeError

__all__ = ["PRIORS", "DEFAULT_PRIORS", "MAX_OUTER", "LOWRANK_SIZE", "MAX_POOLING", "FLOPS_FLOOR", "resolve",
           "prior_options", "violations"]

#: the original's thresholds (design notes §8: the ResNet-18 script's merge multiplier 2048, weight-share dim
#: 8-8, max pooling factor 8)
MAX_OUTER = 2048.0
LOWRANK_SIZE = 8
MAX_POOLING = 8.0
#: FLOPs floor relative to the replaced layers: 0.05 keeps all 12 good operators of the shared data (3 of them
#: are at 0.056x); the original's experiments used 0.1
FLOPS_FLOOR = 0.05

#: every prior, by name
PRIORS = ("weight_io", "outer_kinds", "outer_product", "low_rank", "pooling", "flops_floor", "channel_twins")
#: those `priors=True` turns on (measured on the shared data: see docs/priors.md)
DEFAULT_PRIORS = ("weight_io", "outer_product", "low_rank", "pooling", "flops_floor", "channel_twins")


def resolve(priors: bool | Iterable[str] | None) -> tuple[str, ...]:
    """The prior names an argument means: True -> DEFAULT_PRIORS, False/None -> none, names -> those."""
    if priors is None or priors is False:
        return ()
    if priors is True:
        return DEFAULT_PRIORS
    if isinstance(priors, (str, bytes)) or not isinstance(priors, Iterable):
        raise OptionTypeError(f"priors must be True, False or a list of prior names, got {priors!r}")
    names = tuple(priors)
    unknown = [n for n in names if n not in PRIORS]
    if unknown:
        raise OptionError(f"unknown prior(s) {unknown} (known: {', '.join(PRIORS)})")
    return names


def prior_options(priors: bool | Iterable[str] | None, *, channel_input: int | None = None,
                  widest_output: float = 0.0, depthwise: bool = False) -> dict[str, Any]:
    """OperatorSpace options for `priors` (the FLOPs floor is a budget: substitute sets ``min_flops``).

    `channel_input`: the input position of the channels (channel_twins); `widest_output`: the largest output
    width of the replaced layers (the outer-product limit is raised to it, so the layers' own form stays in);
    `depthwise`: a replaced layer is depthwise (its weight has no outer coordinate: weight_io does not apply).
    """
    names = resolve(priors)
    options: dict[str, Any] = {}
    if "weight_io" in names and not depthwise:
        options["prior_weight_io"] = True
    if "outer_kinds" in names:
        options["prior_outer_kinds"] = True
    if "outer_product" in names:
        options["prior_max_outer"] = max(MAX_OUTER, float(widest_output))
    if "low_rank" in names:
        options["prior_lowrank_size"] = LOWRANK_SIZE
    if "pooling" in names:
        options["prior_max_pooling"] = MAX_POOLING
    if "channel_twins" in names and channel_input is not None:
        options["channel_inputs"] = [channel_input]
    return options


def violations(op: Any) -> list[str]:
    """The rule names of the priors `op` violates under its space's prior options (the FLOPs floor is the space's
    ``min_flops``). Works on replayed operators too: their native node lives in the space's structural twin,
    which carries the prior options but no budgets, so the floor is checked here."""
    found = [name for name in op._native.prior_violations() if name != "flops-floor"]
    if op.total_flops() < op.space.budgets.get("min_flops", 0.0):
        found.append("flops-floor")
    return found
