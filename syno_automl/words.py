"""Counts in the words of the output: ``1 trial``, ``3 trials`` (not ``1 trials``).

Example:
    >>> counted(1, "epochs"), counted(3, "seeds"), counted(0, "trials")
    ('1 epoch', '3 seeds', '0 trials')
"""
from __future__ import annotations

__all__ = ["counted"]


def counted(count: object, plural: str) -> str:
    """``<count> <plural>``, the noun singular (its trailing ``s`` dropped) for a count of exactly 1."""
    one = str(count) == "1" or (isinstance(count, (int, float)) and count == 1)
    return f"{count} {plural[:-1] if one and plural.endswith('s') else plural}"
