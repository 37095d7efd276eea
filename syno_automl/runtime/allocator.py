"""A steady allocator for timing: glibc's malloc thresholds fixed, once per process, before models are timed.

glibc serves a large allocation (a CPU tensor of activations) from fresh ``mmap`` pages above a threshold that it
raises at run time to the largest mmapped block freed so far; fresh pages are faulted in and zeroed on every
call. So a model's speed on the CPU depends on what the process allocated and freed before: measured here, the
same ResNet-18 operator timed in three processes gave 1.32×, 1.46× and 1.52× against the original, and 1.50×,
1.50× and 1.53× with the thresholds fixed. :func:`steady_allocator` fixes them at glibc's largest mmap threshold
(32 MiB on 64-bit) and a trim threshold above it, which also turns the dynamic adjustment off: every process then
serves the same sizes the same way, as a long-running one settles to. (jemalloc or tcmalloc, which PyTorch's
performance guide suggests, would do it too; they are not a dependency here.) Elsewhere than glibc it does
nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["steady_allocator", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # mallopt's parameters (malloc.h)
MMAP_THRESHOLD = 32 * 1024 * 1024               # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 128 * 1024 * 1024


@functools.cache
def steady_allocator() -> bool:
    """Fixes glibc's mmap and trim thresholds for this process (once); False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):   # glibc only (musl, macOS: another allocator)
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                          TRIM_THRESHOLD))
