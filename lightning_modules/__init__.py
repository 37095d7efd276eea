"""Lightning task modules, data modules and a torch-only model zoo for syno_automl.

Example:
    >>> from lightning_modules import ImageClassifier, DigitsDataModule, build_model
    >>> task = ImageClassifier(build_model("small_cnn", num_classes=10, in_channels=1), num_classes=10)
"""
from __future__ import annotations

from .data import DigitsDataModule, TextDataModule, build_datamodule
from .learners import CausalLM, ImageClassifier, NonFiniteLossError
from .models import build_model

__all__ = ["CausalLM", "DigitsDataModule", "ImageClassifier", "NonFiniteLossError", "TextDataModule",
           "build_datamodule", "build_model"]
