"""runtime.allocator: glibc's malloc thresholds are fixed once per process where the C library is glibc."""
from __future__ import annotations

import platform

import pytest

from syno_automl.runtime.allocator import steady_allocator


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_fixed_thresholds_once():
    assert steady_allocator() is True
    assert steady_allocator() is True and steady_allocator.cache_info().hits >= 1
