"""syno_automl: synthesize new neural operators (Syno) as an MLflow-tracked Optuna AutoML plugin."""
from __future__ import annotations

from syno_automl.errors import EmptySpaceError, OperatorFormatError, SpecError, SubstitutionError
from syno_automl.space import Node, Operator, OperatorSpace

__all__ = ["OperatorSpace", "Operator", "Node", "SpecError", "EmptySpaceError", "OperatorFormatError",
           "SubstitutionError"]
__version__ = "0.1.0"
