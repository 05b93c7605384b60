"""Gives the driver's freed heap memory back to the OS after each acked batch: RSS tracks what it holds."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Any

log = logging.getLogger(__name__)

_libc: Any = None


def release_free_memory() -> None:
    """Return freed memory to the OS: Arrow's pool, then glibc's heap (``malloc_trim``).

    A batch's messages (bodies, handles, leases) are freed once it is acked, but glibc keeps
    the pages: on the 1M-message benchmark the Python process grew from 446 to 532 MiB over
    the second half of the run with no more live objects; trimmed after each batch it ended at
    441 MiB. ``malloc_trim`` releases the GIL (a ctypes call) and costs milliseconds. Where
    libc is not glibc it is skipped.
    """
    global _libc
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if _libc is None:
        name = ctypes.util.find_library("c")
        lib = ctypes.CDLL(name) if name else None
        _libc = lib if lib is not None and hasattr(lib, "malloc_trim") else False
    if _libc:
        _libc.malloc_trim(0)
