"""How an error message shows a value the user gave: escaped and capped.

A message that echoes a 100,000-character field whole buries the point, and one holding a raw NUL (or another
control character) is cut short by whatever prints it as a C string. `shown` is `repr` with both fixed: control
characters escaped (``\\x00``), at most `LIMIT` characters of the value, then how long it was.

Example:
    >>> from syno_automl.echo import shown
    >>> shown("a\\x00b")
    "'a\\\\x00b'"
    >>> shown("x" * 100_000)[-30:]
    "xxxxxx'... (100000 characters)"
"""
from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["shown", "LIMIT"]

#: characters of a value an error message shows (the start, or the part around a position)
LIMIT = 80

_short = reprlib.Repr()
_short.maxstring = _short.maxother = LIMIT
_short.maxlevel = 3
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = _short.maxfrozenset = 8


def shown(value: Any, around: int | None = None) -> str:
    """`repr(value)` for an error message: escaped, and capped at LIMIT characters then '... (N characters)'.

    For text with an error `around` a position beyond the first LIMIT characters, the LIMIT characters around
    it are shown instead of the start ('...' marks what was left out on each side)."""
    if isinstance(value, (str, bytes, bytearray)):
        unit = "characters" if isinstance(value, str) else "bytes"
        if len(value) <= LIMIT:
            return repr(value)
        if around is not None and around >= LIMIT - LIMIT // 4:
            start = max(0, min(around - LIMIT // 2, len(value) - LIMIT))
            end = start + LIMIT
            return f"...{value[start:end]!r}{'...' if end < len(value) else ''} ({len(value)} {unit})"
        return f"{value[:LIMIT]!r}... ({len(value)} {unit})"
    try:
        text = _short.repr(value)
    except Exception:  # noqa: BLE001 -- a user object whose __repr__ fails must not hide the error being reported
        return f"<{type(value).__name__} object>"
    # reprlib caps strings, lists and other reprs, but not every type's own: cap what is left
    if not text.isprintable():  # a custom __repr__ may hold raw control characters
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(text) <= 2 * LIMIT:
        return text
    try:
        size = f" ({len(value)} items)"
    except TypeError:
        size = ""
    return f"{text[:2 * LIMIT]}...{size}"
