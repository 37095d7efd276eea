"""Exception types of syno_automl: one root, `SynoError`, so callers can catch everything the package raises.

Each type also keeps a builtin base (ValueError, TypeError, RuntimeError, TimeoutError) so code that catches those
still works. Errors from the native core arrive as these types too (translated in native/bindings.cpp).
docs/architecture.md ("Errors") lists which call raises which.
"""
from __future__ import annotations

__all__ = ["SynoError", "SpecError", "OptionError", "OptionTypeError", "EmptySpaceError", "OperatorFormatError",
           "SubstitutionError", "ResourceError", "InternalError",
           "ValuationError", "MappingIndexError", "NotAChildError", "NotFinalError", "ShapeError",
           "KernelArgumentError", "NoOperatorError", "WeightsNotFoundError", "OutputPathError",
           "DatasetNotFoundError", "DatasetFormatError", "MissingDependencyError", "NothingSampledWarning",
           "CostProfileError", "NotFoundError", "TrackingUnreachableError", "StorageURLError", "TrialResultError",
           "LatencyError", "MissingMetricError", "SettingError", "SettingTypeError", "SettingRangeError",
           "SettingChoiceError", "SettingTaskError", "DataDirError", "DatabaseFileError", "ReadOnlyError"]


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


class MappingIndexError(OptionError, IndexError):
    """A mapping index outside the space's mappings (`op.program(5)` in a space with 2)."""


class NotAChildError(SynoError, KeyError):
    """`node.apply(key)` with a key that is not one of the node's children."""

    def __str__(self) -> str:  # KeyError's own str() is the repr of its message, quotes and all
        return str(self.args[0]) if self.args else ""


class NotFinalError(SynoError, ValueError):
    """An operator asked of a search node that is not final (not a complete operator yet)."""


class ShapeError(SynoError, ValueError):
    """An array or tensor of another shape than a generated kernel or module was built for."""


class KernelArgumentError(SynoError, TypeError):
    """A compiled kernel called with the wrong number of arrays (it takes x, then each weight)."""


class NoOperatorError(SynoError, RuntimeError):
    """A Placeholder run with no operator set and no original layer to fall back to."""


class WeightsNotFoundError(SynoError, LookupError):
    """Trained weights that hold no layer of the asked sizes."""


class OutputPathError(SynoError, FileNotFoundError):
    """A file to write whose folder does not exist (or is not a folder): the message names the folder."""


class DatasetNotFoundError(SynoError, FileNotFoundError):
    """A dataset's folder or files are not where they were said to be: the message lists where it looked."""


class DatasetFormatError(SynoError, ValueError):
    """A dataset file that is not what it should be (not an IDX or CIFAR batch, class folders that differ, a
    corpus too small for the sequence length)."""


class MissingDependencyError(SynoError, ImportError):
    """An optional package a feature needs is not installed: the message says which and how to install it."""


class NothingSampledWarning(UserWarning):
    """`space.sample(n)` found no operator before its attempts or time ran out, though none is proven impossible:
    the budgets may leave none (or very few). Not an error: a later call with more attempts may find some."""


class CostProfileError(SynoError, ValueError):
    """A cost profile file that cannot be used (not JSON, another format version, an unknown target, a missing,
    negative or non-finite coefficient): the message names the file and the field."""


class NotFoundError(SynoError, LookupError):
    """A study, trial, operator or run that a command names is not there (the message says where it looked)."""


class TrackingUnreachableError(SynoError, ConnectionError):
    """An MLflow tracking server that does not answer."""


class StorageURLError(SynoError, ValueError):
    """An Optuna storage URL that names no usable database (not a URL, no driver, no journal path)."""


class DatabaseFileError(SynoError, OSError):
    """A database file (the study's SQLite, MLflow's) that is damaged or is not a database: the message names it."""


class ReadOnlyError(SynoError, PermissionError):
    """A folder or file a command must write (the study's database, MLflow's store) that it cannot write."""


class TrialResultError(SynoError, ValueError):
    """A trial's training ended without a value that can be compared (no finite accuracy, loss or cost)."""


class LatencyError(SynoError, RuntimeError):
    """A latency that could not be measured (the reason is in the message)."""


class MissingMetricError(SynoError, KeyError):
    """A callback monitors a metric the module never logged."""

    def __str__(self) -> str:  # KeyError's own str() is the repr of its message
        return str(self.args[0]) if self.args else ""


class SettingError(SynoError, ValueError):
    """A search setting has a value it cannot take (the message names the flag, or the field without one)."""


class SettingTypeError(SettingError, TypeError):
    """A search setting of the wrong type (e.g. a string where a number belongs)."""


class SettingRangeError(SettingError):
    """A number outside the setting's range."""


class SettingChoiceError(SettingError):
    """A value that is not one of the setting's choices."""


class SettingTaskError(SettingError):
    """A setting given for a task it does not apply to (``--steps`` without ``--task lm``)."""


class DataDirError(SettingError, FileNotFoundError):
    """A dataset's folder that is missing or not given."""
