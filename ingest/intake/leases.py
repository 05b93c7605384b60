"""Tracks in-flight messages and extends their visibility before it runs out (the lease keeper)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ingest.connector import Source
from ingest.errors import IngestError, redact
from ingest.faults import crash_point
from ingest.worker import Worker

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Lease:
    handle: str
    """The newest receipt handle (MNS issues a new one on every visibility change)."""
    deadline: float
    """time.monotonic() at which the message becomes visible again."""
    size: int
    message_id: str | None = None
    extending: bool = False
    """A visibility change is on the wire: the handle may be about to be replaced."""
    received: float = 0.0
    """time.monotonic() when it was received."""


class Taken(NamedTuple):
    """A message the acker took off the in-flight table (see ``InFlight.pop_with_ids``)."""

    handle: str
    message_id: str | None
    received: float | None
    deadline: float | None


class InFlight:
    """Messages received but not yet acked, keyed by (source name, receipt handle at receive).

    Receivers add, the acker pops, the lease keeper extends. The totals drive
    backpressure: receivers pause while ``count`` or ``bytes`` is over its cap.

    An extension and an ack of the same message never cross: ``due`` marks the leases it
    hands out, and ``pop`` waits until their extension is recorded, so the acker deletes with
    the handle the queue issued last (MNS invalidates a handle when its visibility changes).
    """

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._leases: dict[str, dict[str, Lease]] = {}
        self._bytes = 0
        self._count = 0
        self._extending: dict[str, int] = {}
        """Leases per source marked by ``due`` and not yet ``renewed``: acks scan only while > 0."""
        self.peak = 0
        """The most messages in flight at once so far."""

    def add(
        self,
        source: str,
        handles: Sequence[str],
        sizes: Sequence[int],
        visibility: float,
        message_ids: Sequence[str | None] | None = None,
    ) -> None:
        now = time.monotonic()
        deadline = now + visibility
        ids = message_ids if message_ids is not None else [None] * len(handles)
        with self._lock:
            table = self._leases.setdefault(source, {})
            for h, size, mid in zip(handles, sizes, ids, strict=True):
                if h not in table:
                    self._count += 1
                    self._bytes += size
                table[h] = Lease(h, deadline, size, mid, received=now)
            self.peak = max(self.peak, self._count)

    def pop(self, source: str, handles: Sequence[str], wait: float = 30.0) -> list[str]:
        """Forget these messages; return their newest handles (the original one if unknown).

        Waits (at most ``wait`` seconds) for extensions of these messages that are under way.
        """
        return [taken[0] for taken in self.pop_with_ids(source, handles, wait)]

    def pop_with_ids(self, source: str, handles: Sequence[str], wait: float = 30.0) -> list[Taken]:
        """Like ``pop``, with each message's id, receive time and visibility deadline (both
        ``time.monotonic()``), all None for a handle this process did not receive."""
        out: list[Taken] = []
        with self._lock:
            table = self._leases.get(source, {})

            def extending() -> bool:
                if not self._extending.get(source):
                    return False  # the common case, in O(1): no extension on the wire
                return any((lease := table.get(h)) is not None and lease.extending for h in handles)

            if not self._lock.wait_for(lambda: not extending(), wait):
                log.warning("%s: extension still under way after %.0fs; acking anyway", source, wait)
            for h in handles:
                lease = table.pop(h, None)
                if lease is None:
                    out.append(Taken(h, None, None, None))
                else:
                    if lease.extending:  # waited past ``wait``: the extension's end is not awaited
                        self._extending[source] -= 1
                    self._count -= 1
                    self._bytes -= lease.size
                    out.append(Taken(lease.handle, lease.message_id, lease.received, lease.deadline))
        return out

    def due(self, source: str, within: float) -> list[tuple[str, str]]:
        """(original, newest) handles whose visibility ends within ``within`` seconds.

        They are marked as extending until ``renewed`` is called with them in ``attempted``.
        """
        limit = time.monotonic() + within
        with self._lock:
            out = []
            for h, lease in self._leases.get(source, {}).items():
                if lease.deadline <= limit and not lease.extending:
                    lease.extending = True
                    out.append((h, lease.handle))
            self._extending[source] = self._extending.get(source, 0) + len(out)
            return out

    def renewed(
        self, source: str, renewals: dict[str, str], visibility: float, attempted: Sequence[str] = ()
    ) -> None:
        """Record extensions: ``renewals`` maps original handle → newest handle.

        ``attempted`` (original handles from ``due``) end their extension, renewed or not.
        """
        deadline = time.monotonic() + visibility
        with self._lock:
            table = self._leases.get(source, {})
            for original in attempted:
                if (lease := table.get(original)) is not None and lease.extending:
                    lease.extending = False
                    self._extending[source] -= 1
            for original, newest in renewals.items():
                lease = table.get(original)
                if lease is not None:
                    lease.handle = newest
                    lease.deadline = deadline
            self._lock.notify_all()

    def oldest_age(self, source: str) -> float:
        """Seconds since the longest-held in-flight message of ``source`` was received (0 if none)."""
        with self._lock:
            table = self._leases.get(source)
            oldest = next(iter(table.values()), None) if table else None
        return time.monotonic() - oldest.received if oldest is not None else 0.0

    def visible_again_in(self) -> float:
        """Seconds until the last message in flight is visible on its queue again, if nothing
        extends or deletes it (0 when none is in flight)."""
        with self._lock:
            last = max(
                (lease.deadline for table in self._leases.values() for lease in table.values()), default=None
            )
        return max(0.0, last - time.monotonic()) if last is not None else 0.0

    def hidden_for(self) -> float | None:
        """Seconds until the first message in flight is visible on its queue again, if nothing
        extends it (None when none is in flight)."""
        with self._lock:
            first = min(
                (lease.deadline for table in self._leases.values() for lease in table.values()), default=None
            )
        return max(0.0, first - time.monotonic()) if first is not None else None

    def count_of(self, source: str) -> int:
        """Messages of ``source`` in flight."""
        with self._lock:
            return len(self._leases.get(source, ()))

    def all_handles(self, source: str) -> list[str]:
        with self._lock:
            return [lease.handle for lease in self._leases.get(source, {}).values()]

    @property
    def count(self) -> int:
        return self._count

    @property
    def bytes(self) -> int:
        return self._bytes


class LeaseKeeper(Worker):
    """Extends the visibility of in-flight messages when ``margin`` of the timeout is left.

    No user has to set visibility longer than the batch interval: a slow batch or sink
    keeps its messages hidden until they are acked. Extension failures are logged and
    counted; such a message may come back and is then dropped as a duplicate.
    """

    def __init__(
        self,
        inflight: InFlight,
        sources: Sequence[Source],
        margin: float,
        on_extended: Callable[[int], None] = lambda n: None,
    ) -> None:
        super().__init__("lease-keeper")
        self.inflight = inflight
        self.sources = list(sources)
        self.margin = margin
        self.on_extended = on_extended

    def tick(self) -> int:
        """Extend every lease that is due; return how many were extended."""
        total = 0
        for source in self.sources:
            vis = source.visibility_timeout
            due = self.inflight.due(source.name, vis * self.margin)
            for start in range(0, len(due), 100):
                chunk = due[start : start + 100]
                newest_to_original = {newest: original for original, newest in chunk}
                renewed: dict[str, str] = {}
                try:
                    renewed = source.extend(list(newest_to_original), vis)
                    crash_point("during_extend")
                except IngestError as err:
                    log.warning("lease extension on %s failed: %s", source.name, redact(str(err)))
                finally:
                    # Always end the extension, so an ack waiting in pop() goes on.
                    self.inflight.renewed(
                        source.name,
                        {newest_to_original[old]: new for old, new in renewed.items()},
                        vis,
                        attempted=[original for original, _ in chunk],
                    )
                total += len(renewed)
        if total:
            self.on_extended(total)
        return total

    def work(self) -> None:
        interval = max(0.05, min(1.0, min((s.visibility_timeout for s in self.sources), default=1) / 10))
        while not self.stopping.wait(interval):
            try:
                self.tick()
            except Exception:
                log.exception("lease keeper tick failed")
