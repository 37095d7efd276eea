"""Exception types of syno_automl: one root, `SynoError`, so callers can catch everything the package raises.

Each type also keeps a builtin base (ValueError, TypeError, RuntimeError, TimeoutError) so code that catches those
still works. Errors from the native core arrive as these types too (translated in native/bindings.cpp).
docs/architecture.md ("Errors") lists which call raises which.
"""
from __future__ import annotations

__all__ = ["SynoError", "SpecError", "OptionError", "OptionTypeError", "EmptySpaceError", "OperatorFormatError",
           "SubstitutionError", "ResourceError", "InternalError",
           "ValuationError", "CostProfileError"]


class SynoError(Exception):
    """Root of every exception syno_automl raises on purpose."""


class SpecError(SynoError, ValueError):
    """A malformed spec or shape: '"<text>": expected ... at position N' (`position` holds N when known)."""

    position: int | None = None


class OptionError(SynoError, ValueError):
    """An invalid argument of OperatorSpace or of one of its methods (an option, budget, mapping, variable list,
    thread count...): the message names it and says what is allowed."""


class OptionTypeError(OptionError, TypeError):
    """An argument of the wrong type (`max_depth='8'`, mappings given as a dict): the message names it."""


class EmptySpaceError(SynoError, ValueError):
    """No operator exists in the space (the spec, depth and budgets exclude every candidate)."""


class OperatorFormatError(SynoError, ValueError):
    """Operator JSON that is malformed, from another space, or not a canonical operator of this space."""


class SubstitutionError(SynoError, ValueError):
    """A model layer cannot be replaced (an unsupported layer, or no shape information)."""


class ResourceError(SynoError, RuntimeError):
    """The system refused a resource the native core needs (a sampling thread could not start)."""


class InternalError(SynoError, RuntimeError):
    """A broken invariant inside the native core: a bug in syno_automl (please report it with the input)."""


class ValuationError(SynoError, ValueError):
    """Sizes under which an operator does not exist: one of its coordinates is not a positive integer there
    (or an UNFOLD window is even). Canonicity is structural; only this is re-checked at a new valuation."""


class CostProfileError(SynoError, ValueError):
    """A cost profile file that cannot be used (not JSON, another format version, an unknown target, a missing,
    negative or non-finite coefficient): the message names the file and the field."""
