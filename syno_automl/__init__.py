"""syno_automl: synthesize new neural operators (Syno) as an MLflow-tracked Optuna AutoML plugin.

The space (OperatorSpace, Operator) loads without torch or optuna; Placeholder/substitute (torch) and
SynoSampler/suggest_operator (optuna) and the Lightning callbacks (SynoSubstitution, SynoPruning, ...) are imported on
first use.
"""
from __future__ import annotations

import importlib.util as _util
from collections.abc import Callable
from typing import Any

if _util.find_spec("syno_automl._native") is None:  # the C++ core, built by CMake
    import os as _os

    raise ImportError(
        f"syno_automl's C++ core (_native*.so) is not in {_os.path.dirname(__file__)}: this source tree shadows "
        f"the installed package. Install it editable from the repository root (pip install -e ., as "
        f"scripts/install.sh does: builds the core and serves this tree), run from another directory, or build "
        f"the core here: "
        f"cmake -S . -B build/dev -G Ninja -DSKBUILD=ON -DPython_EXECUTABLE=$(which python) && cmake --build "
        f"build/dev && cp build/dev/native/_native*.so syno_automl/")
from syno_automl.errors import (
    EmptySpaceError,
    OperatorFormatError,
    OptionError,
    SpecError,
    SubstitutionError,
    SynoError,
    ValuationError,
)
from syno_automl.space import Node, Operator, OperatorSpace

__all__ = ["OperatorSpace", "Operator", "Node", "Placeholder", "Substitution", "substitute", "SynoSampler",
           "suggest_operator", "SynoSubstitution", "SynoPruning", "SlowTrialGuard", "TrainingTimeBudget",
           "EpochMetricsLogger", "SynoError", "SpecError", "OptionError", "EmptySpaceError", "OperatorFormatError",
           "SubstitutionError", "ValuationError"]
__version__ = "0.1.0"

def lazy_attributes(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A package face's PEP 562 ``__getattr__``: each name of `homes` is imported on first use from its submodule
    (``package.<home>``), so that the face names it without loading torch, Lightning, MLflow or matplotlib."""
    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(f"{package}.{homes[name]}"), name)
    return __getattr__


__getattr__ = lazy_attributes(__name__, {
    "Placeholder": "placeholder", "Substitution": "placeholder", "substitute": "placeholder",
    "SynoSampler": "search.sampler", "suggest_operator": "search.sampler",
    "SynoSubstitution": "search.callbacks", "SynoPruning": "search.callbacks", "EpochMetricsLogger": "search.callbacks",
    "SlowTrialGuard": "search.time_limits", "TrainingTimeBudget": "search.time_limits",
})
