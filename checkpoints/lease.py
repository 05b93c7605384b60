"""The checkpoint lock on object storage: a lease object per generation, taken by conditional PUT."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from ingest.errors import ConfigError, FatalError
from ingest.storage import Store

log = logging.getLogger(__name__)

HEARTBEAT = 10.0
"""Seconds between a holder's renewals of its lease."""
STALE = 60.0
"""Seconds without a renewal after which a start takes a lease over (six missed renewals)."""
PREFIX = "lock."


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``), or None if it is
    gone or cannot be told: with its pid, it names one process, never a later one reusing the pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


class Lease:
    """One running instance per checkpoint where no ``flock`` reaches: ``<checkpoint>/mq_ingest/lock.<n>``.

    Generation ``n`` is held by whoever created ``lock.<n>`` (a conditional PUT, ``If-None-Match:
    *``: of two racing starters exactly one gets it). The object records the holder's host, pid,
    process start time and its last renewal (``beat``, epoch seconds). A start reads the newest
    generation and takes ``n+1`` when that lease is released, stale (no renewal for ``stale``
    seconds), or held on this host by a process that is gone (a ``kill -9``: taken at once, no
    wait); otherwise it is refused, naming the holder. Generations only grow (a release marks the
    lease released rather than deleting it), and a start deletes the generations before its own.

    The holder renews every ``heartbeat`` seconds on a thread of its own: one LIST of
    ``mq_ingest/`` and one PUT of its lease, about 17,000 requests a day at 10 s (under a dime
    on AWS S3). The LIST is how it learns it lost the lock: a newer generation exists (it was
    paused, or cut off from the store, for longer than ``stale`` and another instance took over).
    It then sets ``lost``, calls ``on_lost`` once with the reason, and renews no more;
    ``ensure_held`` raises it, checking the store first when the last check is older than two
    heartbeats (a process resuming from a pause learns it before its next write). A failed
    renewal (an outage) is retried at the next heartbeat. Staleness compares the lease's ``beat``
    with the reader's clock: hosts' clocks must agree to well within ``stale`` (NTP does).
    """

    def __init__(
        self,
        store: Store,
        heartbeat: float = HEARTBEAT,
        stale: float = STALE,
        on_lost: Callable[[str], None] | None = None,
        details: Callable[[], dict[str, Any]] | None = None,
        what: str = "checkpoint",
        fence: bool = False,
        named: str | None = None,
    ) -> None:
        self.store = store
        self.what = what
        """What the lease guards, as its log lines and errors name it (``intake worker``)."""
        self.named = named or store.url()
        """Where, as a refused start names it (a checkpoint's lock: the checkpoint, not its folder)."""
        self.fence = fence
        """Lose the lease, too, once no renewal has worked for ``stale`` seconds: another instance may
        have taken it over and removed it (an intake worker's, which the job removes once it took over)."""
        self._renewed = 0.0
        self.details = details
        """More fields for the lease's record at each renewal (an intake worker's ``held_until``)."""
        self.previous: dict[str, Any] = {}
        """The record of the lease this instance took over (its holder's last renewal), or ``{}``."""
        self.heartbeat = heartbeat
        self.stale = stale
        self.on_lost = on_lost
        self.generation: int | None = None
        self.lost = threading.Event()
        """Set once another instance took the lock over; ``reason`` says who."""
        self.reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._checked = 0.0
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._start = start_time(self._pid)

    def acquire(self) -> None:
        """Take the next generation, or raise ``ConfigError`` naming the live holder."""
        for _ in range(5):
            gens = self._generations()
            target = 0
            if gens:
                data = self.store.read(f"{PREFIX}{gens[-1]}")
                if data is None:
                    continue  # deleted meanwhile by a newer start: look again
                holder = self.previous = _parsed(data)
                why = self._free(holder)
                if why is None:
                    raise ConfigError(self._refusal(holder))
                log.info("%s lock: lease %d %s; taking over", self.what, gens[-1], why)
                target = gens[-1] + 1
            if self.store.create(f"{PREFIX}{target}", self._record()):
                self.generation = target
                self._checked = self._renewed = time.monotonic()
                self.store.delete(f"{PREFIX}{g}" for g in gens if g < target)
                name = f"{self.what.replace(' ', '-')}-lease"
                self._thread = threading.Thread(target=self._renew, name=name, daemon=True)
                self._thread.start()
                return
        raise ConfigError(f"{self.what} {self.store.url()}: the lock is contended by other starts; try again")

    def release(self) -> None:
        """Stop renewing and mark the lease released, so the next start takes over at once."""
        if self.generation is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.lost.is_set():
            try:
                self.store.write(f"{PREFIX}{self.generation}", self._record(released=True))
            except OSError as err:  # the next start waits for the lease to go stale
                log.warning("%s lock: lease not released: %s", self.what, err)
        self.generation = None

    def ensure_held(self) -> None:
        """Raise ``FatalError`` if another instance took the lock over (see the class docstring)."""
        if not self.lost.is_set() and time.monotonic() - self._checked > 2 * self.heartbeat:
            self._check()
        if self.lost.is_set():
            raise FatalError(self.reason)

    def _renew(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                # Counted from before the check: a renewal that lands after a pause between the
                # two (the lease taken over and removed meanwhile) still leaves the gap to fence on.
                started = time.monotonic()
                if not self._check():
                    return
                self.store.write(f"{PREFIX}{self.generation}", self._record())
                self._renewed = started
            except OSError as err:
                log.warning(
                    "%s lock: lease not renewed (tried again in %.0fs): %s", self.what, self.heartbeat, err
                )

    def _check(self) -> bool:
        """Whether this instance still holds the lock; on a newer generation (or, fenced, a renewal
        older than ``stale``), lose it."""
        if self.lost.is_set():
            return False
        gap = time.monotonic() - self._renewed
        if self.fence and gap > self.stale:
            self._lose(
                f"{self.what} {self.store.url()}: no lease renewal for {gap:.0f}s (over {self.stale:.0f}s: "
                "paused or cut off from the store), so its work may have been taken over; this instance stops"
            )
            return False
        newer = [g for g in self._generations() if self.generation is not None and g > self.generation]
        if newer:
            holder = _parsed(self.store.read(f"{PREFIX}{newer[-1]}") or b"{}")
            self._lose(
                f"{self.what} {self.store.url()}: the lock was taken over by host {holder.get('host', '?')} "
                f"pid {holder.get('pid', '?')} (this instance renewed no lease for longer than "
                f"{self.stale:.0f}s: paused or cut off from the store); this instance stops"
            )
        self._checked = time.monotonic()
        return not newer

    def _lose(self, reason: str) -> None:
        self.reason = reason
        self.lost.set()
        log.error("%s", self.reason)
        if self.on_lost is not None:
            self.on_lost(self.reason)

    def _generations(self) -> list[int]:
        stems = (name[len(PREFIX) :] for name in self.store.list() if name.startswith(PREFIX))
        return sorted(int(stem) for stem in stems if stem.isdigit())

    def _free(self, holder: dict[str, Any]) -> str | None:
        """Why the lease of ``holder`` may be taken over, or None while it holds."""
        if holder.get("released"):
            return "was released"
        if holder.get("host") == self._host and start_time(int(holder.get("pid", 0))) != holder.get("start"):
            return f"was held by pid {holder.get('pid')} of this host, which has ended"
        age = time.time() - float(holder.get("beat", 0))
        return f"was last renewed {age:.0f}s ago" if age > self.stale else None

    def _refusal(self, holder: dict[str, Any]) -> str:
        age = max(0.0, time.time() - float(holder.get("beat", 0)))
        return (
            f"{self.what} {self.named} is in use by another running "
            f"instance of this job (host {holder.get('host')}, pid {holder.get('pid')}, lease renewed "
            f"{age:.0f}s ago; a start takes it over once it is {self.stale:.0f}s old)"
        )

    def _record(self, released: bool = False) -> bytes:
        extra = self.details() if self.details is not None else {}
        return orjson.dumps(
            {
                **extra,
                "host": self._host,
                "pid": self._pid,
                "start": self._start,
                "beat": time.time(),
                "released": released,
            }
        )


def _parsed(data: bytes) -> dict[str, Any]:
    """A lease's record; ``{}`` (taken for stale) if unreadable, which a lease written whole never is."""
    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}
