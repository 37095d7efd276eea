"""Exception types of syno_automl. All are ValueError or RuntimeError subclasses, so callers can be broad."""
from __future__ import annotations

from syno_automl._native import SpecError  # a ValueError: "<text>": expected ... at position N

__all__ = ["SpecError", "EmptySpaceError", "OperatorFormatError", "SubstitutionError"]


class EmptySpaceError(ValueError):
    """No operator exists in the space (the spec, depth and budgets exclude every candidate)."""


class OperatorFormatError(ValueError):
    """Operator JSON that is malformed, from another space, or not a canonical operator of this space."""


class SubstitutionError(ValueError):
    """A model layer cannot be replaced (an unsupported layer, or no shape information)."""
