"""Keeps one Python thread state on each awscrt event-loop thread, instead of one made per callback."""

from __future__ import annotations

import ctypes
import os
import threading

_pinned: set[int] = set()
"""Threads (``threading.get_ident``) that keep their thread state."""


def keep_thread_state() -> None:
    """Call from an awscrt callback (an event-loop thread, the GIL held); cheap after the first call.

    awscrt runs each Python callback between ``PyGILState_Ensure`` and ``PyGILState_Release`` on
    threads Python did not start. When the release brings the thread's count to zero, CPython
    deletes its thread state, and the next callback makes a new one, with a new frame stack mapped
    and unmapped each time: an ``mmap``, a ``munmap`` and a TLB flush across the CPUs for every
    callback, three or four per request. That was 40% of the event-loop thread's CPU (``perf``,
    docs/performance-history.md). One more ``PyGILState_Ensure``, never released, keeps the count
    above zero for the thread's life, the pattern CPython's documentation gives for foreign threads
    that call in repeatedly (gh-146219). At interpreter exit awscrt calls no more callbacks
    (``Py_IsInitialized`` is false), and the kept state is freed with the interpreter's others.
    """
    ident = threading.get_ident()
    if ident in _pinned:
        return
    _pinned.add(ident)
    ctypes.pythonapi.PyGILState_Ensure()


os.register_at_fork(after_in_child=_pinned.clear)
