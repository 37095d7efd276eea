"""Exception types of syno_automl. All are ValueError or RuntimeError subclasses, so callers can be broad."""
from __future__ import annotations

from syno_automl._native import SpecError  # a ValueError: "<text>": expected ... at position N

__all__ = ["SpecError", "EmptySpaceError", "OperatorFormatError", "SubstitutionError", "ValuationError"]


class EmptySpaceError(ValueError):
    """No operator exists in the space (the spec, depth and budgets exclude every candidate)."""


class OperatorFormatError(ValueError):
    """Operator JSON that is malformed, from another space, or not a canonical operator of this space."""


class SubstitutionError(ValueError):
    """A model layer cannot be replaced (an unsupported layer, or no shape information)."""


class ValuationError(ValueError):
    """Sizes under which an operator does not exist: one of its coordinates is not a positive integer there
    (or an UNFOLD window is even). Canonicity is structural; only this is re-checked at a new valuation."""
