"""The error a malformed kernel-IR program raises."""

from __future__ import annotations

from syno_automl.errors import SynoError

__all__ = ["IRError"]


class IRError(SynoError, ValueError):
    """A program dict (docs/architecture.md §2) that is malformed or inconsistent; the message names the key,
    the step or the dim at fault."""
