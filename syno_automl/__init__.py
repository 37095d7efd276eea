"""syno_automl: synthesize new neural operators (Syno) as an MLflow-tracked Optuna AutoML plugin.

The space (OperatorSpace, Operator) loads without torch or optuna; Placeholder/substitute (torch) and
SynoSampler/suggest_operator (optuna) and the Lightning callbacks (SynoSubstitution, SynoPruning, ...) are imported on
first use.
"""
from __future__ import annotations

import importlib.util as _util
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

_LAZY = {
    "Placeholder": "syno_automl.placeholder", "Substitution": "syno_automl.placeholder",
    "substitute": "syno_automl.placeholder",
    "SynoSampler": "syno_automl.search.sampler", "suggest_operator": "syno_automl.search.sampler",
    "SynoSubstitution": "syno_automl.search.callbacks", "SynoPruning": "syno_automl.search.callbacks",
    "EpochMetricsLogger": "syno_automl.search.callbacks",
    "SlowTrialGuard": "syno_automl.search.time_limits", "TrainingTimeBudget": "syno_automl.search.time_limits",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'syno_automl' has no attribute {name!r}")
