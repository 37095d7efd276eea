"""Lightning task modules, data modules and a torch-only model zoo for syno_automl.

The names load on first use (PEP 562): ``lightning_modules.models`` imports torch alone, so that a process that
only builds and times models (the final stage's fresh timing process) does not pay ~4.5 s for Lightning.

Example:
    >>> from lightning_modules import ImageClassifier, DigitsDataModule, build_model
    >>> task = ImageClassifier(build_model("small_cnn", num_classes=10, in_channels=1), num_classes=10)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from syno_automl import lazy_attributes

if TYPE_CHECKING:
    from .data import DigitsDataModule, TextDataModule, build_datamodule
    from .learners import CausalLM, ImageClassifier, NonFiniteLossError
    from .models import build_model

__all__ = ["CausalLM", "DigitsDataModule", "ImageClassifier", "NonFiniteLossError", "TextDataModule",
           "build_datamodule", "build_model"]
__getattr__ = lazy_attributes(__name__, {
    "DigitsDataModule": "data", "TextDataModule": "data", "build_datamodule": "data",
    "CausalLM": "learners", "ImageClassifier": "learners", "NonFiniteLossError": "learners",
    "build_model": "models"})
