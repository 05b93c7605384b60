"""The driver process's memory: freed heap back to the OS after each acked batch; a GC fit for streaming."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

_libc: Any = None
M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas (what ``MALLOC_ARENA_MAX`` sets)."""
ARENAS = 2
"""The malloc arenas the driver's Python process and its JVM each keep to."""


def _glibc() -> Any:
    """glibc, or False where libc is another (musl, macOS): its tuning calls are then skipped."""
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        lib = ctypes.CDLL(name) if name else None
        _libc = lib if lib is not None and hasattr(lib, "malloc_trim") else False
    return _libc


def cap_arenas(count: int = ARENAS) -> bool:
    """Cap this process's malloc arenas at ``count``, as ``MALLOC_ARENA_MAX`` would; True if set.

    glibc gives a thread that meets another in malloc an arena of its own (up to 8 a core) and
    keeps their pages: the receivers, stager, acker and Py4J threads each came to hold one. Over
    ``bench/e2e_fake.py --quick`` (six runs in one process) the Python driver's peak went from
    288 to 571 MiB uncapped and from 277 to 475 MiB at 2, throughput the same within noise
    (``docs/performance-history.md``). glibc fixes the limit when the process makes its second
    arena, so it only works before threads have met in malloc: the command line calls it first
    thing, ``make_session`` again for jobs run from a user's Python (too late after threads of
    their own, then it changes nothing). ``MALLOC_ARENA_MAX`` in the environment, read by glibc
    at start, is the user's choice and is kept.
    """
    if "MALLOC_ARENA_MAX" in os.environ or not (libc := _glibc()):
        return False
    return bool(libc.mallopt(M_ARENA_MAX, count))


def release_free_memory() -> None:
    """Return freed memory to the OS: Arrow's pool, then glibc's heap (``malloc_trim``).

    A batch's messages (bodies, handles, leases) are freed once it is acked, but glibc keeps
    the pages: on the 1M-message benchmark the Python process grew from 446 to 532 MiB over
    the second half of the run with no more live objects; trimmed after each batch it ended at
    441 MiB. ``malloc_trim`` releases the GIL (a ctypes call) and costs milliseconds. Where
    libc is not glibc it is skipped.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if libc := _glibc():
        libc.malloc_trim(0)


YOUNG_THRESHOLD = 20_000
"""Allocations between young collections while a job streams (CPython's default is 700)."""
_lock = threading.Lock()
_streaming = 0
_before = gc.get_threshold()


@contextmanager
def streaming_gc(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Run a streaming job with less of CPython's cyclic garbage collection, then restore it.

    Every message leaves several container objects (a lease, a journal entry) alive for the
    seconds until its batch is acked, so they survive the young collections and pile into the
    oldest generation, and each full collection walks them together with every object the
    start made (modules, the SparkSession, Py4J), holding the GIL for long pauses.

    So, as long-running Python services do: ``gc.freeze()`` what exists when the job starts
    streaming (it stays alive for the run; frozen objects are still freed by reference
    counting), and collect the young generation every ``young`` allocations instead of every
    700, the older ones 20 times rarer each. Reference cycles are still collected, seconds
    later. The measurements are in ``docs/performance-history.md`` ("The garbage collector").
    Jobs streaming at once in one process share the setting; the last one out restores it.

    Example:
        >>> before = gc.get_threshold()
        >>> with streaming_gc(10_000):
        ...     gc.get_threshold()[0]
        10000
        >>> gc.get_threshold() == before
        True
    """
    global _streaming, _before
    with _lock:  # the collector is the process's: jobs streaming at once share one setting
        if _streaming == 0:
            _before = gc.get_threshold()
            gc.collect()
            gc.freeze()
            gc.set_threshold(young, 20, 20)
        _streaming += 1
    try:
        yield
    finally:
        with _lock:
            _streaming -= 1
            if _streaming == 0:
                gc.set_threshold(*_before)
                gc.unfreeze()
