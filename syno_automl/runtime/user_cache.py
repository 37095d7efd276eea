"""The user's cache folder, where syno_automl keeps what it makes once and reads again: ``$XDG_CACHE_HOME/syno_automl``
(``~/.cache/syno_automl`` where it is unset). Its tenants: the empty databases of
:mod:`syno_automl.runtime.sqlite_template` and MNIST-1D's generated data (``lightning_modules.data.mnist1d``).

Example:
    >>> user_cache_folder().name
    'syno_automl'
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "user_cache_folder"]

CACHE_ENV = "XDG_CACHE_HOME"


def user_cache_folder() -> Path:
    """``$XDG_CACHE_HOME/syno_automl`` (``~/.cache/syno_automl`` where it is unset), read at each call."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache") / "syno_automl"
