"""What a speed figure is about: a :class:`SpeedSubject`, the one frozen record everything that times takes.

A subject is the substitution (the model with its placeholders: the original is its ``original_model()``, an
operator's model is the substitution with that operator installed), the batch the models are timed on and how the
tables describe it, the precision and the speed target. Nothing in ``speed/`` reads a search's context: the study
wing builds the subject (``SearchContext.speed_subject``) and hands it in.

A fresh timing process (speed/process.py) needs the subject again in another interpreter. A subject holds a
``recipe``: a picklable callable (a module-level function, or a ``functools.partial`` of one, with picklable
arguments) that builds the same subject for a target in the new process. The study wing gives one that prepares
the search's context from its config and the batches read off its data, so ``speed/`` never imports ``study/``.

Example:
    >>> import torch
    >>> from syno_automl.runtime import parse_target
    >>> subject = SpeedSubject(None, torch.zeros(4, 3), "batch 4", "fp32", parse_target("cpu.eager"))
    >>> subject.target.compiled, subject.batch_label
    (False, 'batch 4')
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from syno_automl.runtime import SpeedTarget

if TYPE_CHECKING:
    from syno_automl.placeholder import Substitution

__all__ = ["SpeedSubject", "SubjectRecipe", "precision_name"]

#: builds a subject for a target, in a new process (picklable: a module-level function or a partial of one)
SubjectRecipe = Callable[[SpeedTarget], "SpeedSubject"]


def precision_name(precision: str) -> str:
    """Lightning's precision setting as the conditions name it (``bf16-mixed`` -> ``bf16``)."""
    return {"bf16-mixed": "bf16", "16-mixed": "fp16", "bf16": "bf16", "fp16": "fp16"}.get(precision, "fp32")


@dataclass(frozen=True, eq=False)
class SpeedSubject:
    """The models to time (a substitution), the batch they are timed on and its label, the precision
    (``fp32``/``bf16``/``fp16``: :func:`precision_name`) and the target; ``recipe`` rebuilds it in another process
    (None: it cannot be, and a fresh-process timing falls back to this one, saying so). The batch is the regime the
    figure is about (its label names it: ``batch 1 at 224×224``): operators of another space (the search's, at the
    training's sizes) are replayed in the substitution's space before they are timed (speed/probe.py)."""

    substitution: Substitution
    example: Any                  # the timing batch (a CPU tensor: the probe moves it to the target's device)
    batch_label: str              # how the tables describe it: "batch 64", "batch 8 × 128 tokens"
    precision: str
    target: SpeedTarget
    recipe: SubjectRecipe | None = field(default=None, repr=False)
    compile_mode: str = "default"  # torch.compile's mode on a compiled target: "default" or "max-autotune"
