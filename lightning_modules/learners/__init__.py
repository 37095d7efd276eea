"""Lightning task modules: image classification and causal language modelling."""
from __future__ import annotations

from .causal_lm import CausalLM
from .errors import NonFiniteLossError
from .image_classifier import ImageClassifier

__all__ = ["CausalLM", "ImageClassifier", "NonFiniteLossError"]
