"""Runs a source's chunked queue calls (deletes, visibility changes) side by side on a lazily made pool."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class CallPool:
    """Up to ``threads`` queue calls at once, for a source whose batches span many calls.

    A batch of 100,000 messages is 10,000 ``DeleteMessageBatch`` calls on SQS; one after the
    other, at 10 ms each, the acker would need 100 s for it. ``map`` runs them on a thread
    pool made on first use; one item, or one thread, runs in the caller's thread. An
    exception from any call is raised by ``map`` once every call has ended. Pickles without
    its threads, so an owner can still be shipped to executors.

    Example:
        >>> pool = CallPool("example", threads=4)
        >>> pool.map(lambda chunk: sum(chunk), [[1, 2], [3], [4, 5]])
        [3, 3, 9]
        >>> pool.close()
    """

    def __init__(self, name: str, threads: int) -> None:
        self.name = name
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "threads": self.threads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        CallPool.__init__(self, state["name"], state["threads"])

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, the calls run side by side, results in order."""
        if self.threads == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
            pool = self._pool
        futures = [pool.submit(fn, item) for item in items]
        errors = [f.exception() for f in futures]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        return [f.result() for f in futures]

    def close(self) -> None:
        """Wait for the calls under way and drop the threads; ``map`` makes new ones if called again."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
