"""Starts a job's background parts in order, stops them in reverse, and reports the first failure once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Protocol

from ingest.worker import Watcher, Worker

log = logging.getLogger(__name__)


class Part(Protocol):
    """What the supervisor runs: a ``Worker``, or a group of them (the receiver pool)."""

    name: str

    def start(self) -> object: ...

    def stop(self, timeout: float | None = None) -> object: ...

    def watch(self, watcher: Watcher) -> None: ...

    def workers(self) -> Iterable[Worker]: ...


class Supervisor:
    """The job's background parts: started in order, stopped in reverse, their first failure kept.

    Each started part is watched: the first error any of them reports is ``failure``, kept
    once (later ones are only logged by their worker). ``check`` raises it, which ends the
    job's run and sets its exit code; ``unhealthy`` answers ``/healthz`` from the same failure,
    so both report the same thing.

    Example:
        >>> sup = Supervisor()
        >>> bad = Worker("bad", target=lambda: 1 / 0)
        >>> sup.start(bad); bad.join(5)
        True
        >>> str(sup.failure)
        'bad thread failed: ZeroDivisionError: division by zero'
        >>> sup.stop()
    """

    def __init__(self) -> None:
        self.parts: list[Part] = []
        """Started parts, in the order they started."""
        self.failed = threading.Event()
        """Set with the first failure, for a loop that waits on it."""
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def start(self, part: Part) -> None:
        """Watch ``part`` and start it; ``stop`` stops it before the parts started earlier."""
        part.watch(self._report)
        self.parts.append(part)
        part.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the parts in reverse order, all within ``timeout`` seconds (None: waiting for each).

        A part whose stop raises is logged; the others are stopped all the same.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.parts:
            part = self.parts.pop()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                part.stop(left)
            except Exception:
                log.exception("stopping %s failed", part.name)

    @property
    def failure(self) -> BaseException | None:
        """The first error a part reported, or None."""
        return self._failure

    def check(self) -> None:
        """Raise the first failure, if there is one."""
        if self._failure is not None:
            raise self._failure

    def unhealthy(self) -> str | None:
        """The first failure, else a thread of a running part that ended unasked; None if all is well."""
        if self._failure is not None:
            return str(self._failure)
        for part in self.parts:
            for worker in part.workers():
                if (why := worker.unhealthy()) is not None:
                    return why
        return None

    def fail(self, err: BaseException) -> None:
        """Report a failure from outside the parts (the checkpoint lock lost): the job stops with it."""
        with self._lock:
            if self._failure is None:
                self._failure = err
        self.failed.set()
        log.info("job stopping: %s", err)

    def _report(self, worker: Worker, err: BaseException) -> None:
        with self._lock:
            if self._failure is not None:
                return
            self._failure = err
        self.failed.set()
        log.info("job stopping: first failure is of %s", worker.name)
