"""Receiver threads: long-poll a source in batches, register leases, hand envelopes to the stager."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ingest.connector import Source
from ingest.errors import FatalError, IngestError, redact
from ingest.intake.envelope import encode
from ingest.intake.leases import InFlight
from ingest.intake.staging import Stager
from ingest.metrics import Metrics
from ingest.worker import Watcher, Worker

if TYPE_CHECKING:
    from ingest.config import JobConfig

log = logging.getLogger(__name__)


HOLD_FLOOR = 5.0
"""Seconds a source's oldest in-flight message may always be held before its receivers pause."""


def hold_limit(visibility: float, lease_margin: float) -> float:
    """How long a source's oldest in-flight message may be held before its receivers pause: half
    the time until the lease keeper would extend it, and at least ``HOLD_FLOOR`` seconds.

    >>> hold_limit(30, 0.5)
    7.5
    >>> hold_limit(3, 0.5)
    5.0
    """
    return max(HOLD_FLOOR, visibility * (1 - lease_margin) / 2)


class Backpressure:
    """Receivers wait while in-flight messages or staged bytes exceed their caps (the job's, and
    a source's own ``max_outstanding_messages``) or staging fails (``blocked``: a pause the job
    reports), and while a source's oldest in-flight message has been held longer than its
    ``hold`` limit (``holding``: pacing, not reported).

    The hold limit sizes the in-flight window from the rate the pipeline acks at (Little's
    law): a pipeline slower than the receivers would otherwise fill the whole window, and its
    messages would wait long enough to need visibility extensions, one more call each.
    Paused, the receivers leave them on the queue instead.
    """

    def __init__(
        self,
        inflight: InFlight,
        max_in_flight: int,
        max_bytes: int,
        stager: Stager | None = None,
        per_source: dict[str, int] | None = None,
        hold: dict[str, float] | None = None,
    ) -> None:
        self.inflight = inflight
        self.max_in_flight = max_in_flight
        self.max_bytes = max_bytes
        self.stager = stager
        self.per_source = per_source or {}
        self.hold = hold or {}

    def blocked(self, source: str | None = None) -> bool:
        if self.stager is not None and self.stager.failing:
            return True
        cap = self.per_source.get(source) if source is not None else None
        if source is not None and cap is not None and self.inflight.count_of(source) >= cap:
            return True
        return self.inflight.count >= self.max_in_flight or self.inflight.bytes >= self.max_bytes

    def holding(self, source: str) -> bool:
        """Whether ``source``'s oldest in-flight message has been held past its hold limit."""
        hold = self.hold.get(source)
        return hold is not None and self.inflight.oldest_age(source) > hold


class Receiver(Worker):
    """One thread polling one source: receive → lease → stage, until stopped.

    ``empty_streak`` counts receives in a row that returned nothing (the queue looked
    empty); drain runs use it to know when the queues are drained. A receiver paused by
    backpressure is not empty. A failed receive ends the streak, and empty receives prove
    nothing until the messages it may have taken come back (``unsure_until``: moto answers
    500 to a receive racing another after hiding some messages). Stopped with ``keep`` (a
    drain's end), a receive in flight stages what it got, for the drain's last batch, instead
    of giving it back.
    A fatal source error, or any other fault (encoding a body, the lease table, a bug), stops
    the receiver and is kept in ``error`` for the job to raise within its next check.
    """

    def __init__(
        self,
        source: Source,
        index: int,
        stager: Stager,
        inflight: InFlight,
        backpressure: Backpressure,
        metrics: Metrics,
        wait_seconds: float,
        on_event: Callable[[str, str], None] = lambda name, text: None,
    ) -> None:
        super().__init__(f"receiver-{source.name}-{index}")
        self.title = f"receiver thread {self.name}"  # how its errors name it
        self.source = source
        self.label = f"{source.name}#{index}"
        """Its short name in job events, log lines and the envelopes it stages (``receiver``)."""
        self.stager = stager
        self.inflight = inflight
        self.backpressure = backpressure
        self.metrics = metrics
        self.wait_seconds = wait_seconds
        self.on_event = on_event
        self.empty_streak = 0
        self.last_empty_asked = 0.0
        """time.monotonic() when the latest receive that came back empty was asked."""
        self.unsure_until = 0.0
        """time.monotonic() until which an empty receive proves nothing (a receive failed)."""
        self.keep = False
        """Stage what a receive in flight at the stop returns (else it is given back)."""
        self.received = 0
        self.paused_since: float | None = None
        """time.monotonic() since when backpressure has paused it, or None (read by ``/healthz``)."""
        self.failing_since: float | None = None
        """time.monotonic() when the first of its receives failing in a row was asked, or None."""
        self.failure = ""
        """Why its latest failed receive failed (redacted)."""

    def work(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            if self.backpressure.blocked(self.source.name):
                if self.paused_since is None:
                    self.paused_since = time.monotonic()
                    self.metrics.inc("backpressurePauses", source=self.source.name)
                    self.on_event("RECEIVER_PAUSED", f"{self.label} paused: in-flight/staged caps reached")
                self.stopping.wait(0.05)
                continue
            if self.paused_since is not None:
                self.paused_since = None
                self.on_event("RECEIVER_RESUMED", f"{self.label} resumed")
            if self.backpressure.holding(self.source.name):
                self.stopping.wait(0.05)
                continue
            asked = time.monotonic()
            try:
                batch = self.source.receive(self.source.max_batch, self.wait_seconds)
            except FatalError as err:
                self.fail(err)
                return
            except IngestError as err:
                # Served or not? Its messages, if any, are hidden until their visibility ends.
                self.empty_streak = 0
                self._unsure(time.monotonic())
                failures += 1
                delay = min(10.0, 0.1 * 2**failures)
                why = self.failure = redact(str(err))
                log.warning("receive on %s failed (retry in %.1fs): %s", self.label, delay, why)
                self.metrics.inc("receiveErrors", source=self.source.name)
                if failures == 1:
                    self.failing_since = asked
                    self.on_event("RECEIVE_FAILING", f"{self.label}: receive failed, retrying: {why}")
                self.stopping.wait(delay)
                continue
            # An attempt the source retried; a source that does not inherit Source's defaults has none.
            self._unsure(getattr(self.source, "receive_failed_at", 0.0))
            if failures:
                self.on_event("RECEIVE_RECOVERED", f"{self.label}: receiving again after {failures} failures")
                failures, self.failing_since = 0, None
            if not batch:
                self.last_empty_asked = asked
                self.empty_streak += 1
                self.stager.idle(asked)
                if self.wait_seconds <= 0:  # short polling: do not spin on an empty queue
                    self.stopping.wait(0.1)
                continue
            self.empty_streak = 0
            staging = time.monotonic()
            try:
                self._stage(batch)
            except BaseException:
                with contextlib.suppress(Exception):  # give the batch back before stopping
                    self.source.release([m.receipt_handle for m in batch])
                raise
            self.metrics.inc("phaseSeconds", staging - asked, phase="receive")
            self.metrics.inc("phaseSeconds", time.monotonic() - staging, phase="stage")

    def _unsure(self, failed_at: float) -> None:
        """A receive attempt failed at ``failed_at``: empty receives prove nothing until the
        messages it may have hidden are visible again."""
        if failed_at:
            self.unsure_until = max(self.unsure_until, failed_at + self.source.visibility_timeout)

    def _stage(self, batch) -> None:
        if self.stopping.is_set() and not self.keep:
            # Stopped while this receive was in flight: give the messages back at once.
            self.source.release([m.receipt_handle for m in batch])
            return
        lines = encode(self.source.name, self.source.queue, self.label, batch)
        self.inflight.add(
            self.source.name,
            [m.receipt_handle for m in batch],
            [len(line) for line in lines],
            self.source.visibility_timeout,
            [m.message_id for m in batch],
        )
        self.stager.add(lines)
        n = len(batch)
        self.received += n
        self.metrics.inc("received", n, source=self.source.name)
        again = sum(1 for m in batch if m.receive_count > 1)
        self.metrics.inc("redeliveredMessages", again, source=self.source.name)


class ReceiverPool:
    """The job's receiver threads, ``receivers`` per source: started and stopped together, their
    faults raised or reported as one.

    A drain (``trigger.mode: available_now``) caps each long poll at ``trigger.drain_wait``, so
    it ends seconds after its last message rather than up to two source waits later.
    """

    def __init__(
        self,
        cfg: JobConfig,
        sources: Mapping[str, Source],
        stager: Stager,
        inflight: InFlight,
        backpressure: Backpressure,
        metrics: Metrics,
        on_event: Callable[[str, str], None],
    ) -> None:
        self.cfg = cfg
        self.sources = sources
        self.stager = stager
        self.inflight = inflight
        self.backpressure = backpressure
        self.metrics = metrics
        self.on_event = on_event
        self.name = "receivers"
        self.threads: list[Receiver] = []
        self._watchers: list[Watcher] = []

    def start(self) -> None:
        drain = self.cfg.trigger.mode == "available_now"
        for cfg in self.cfg.sources:
            wait = min(cfg.poll_wait, self.cfg.trigger.drain_wait) if drain else cfg.poll_wait
            for i in range(cfg.receivers):
                r = Receiver(
                    self.sources[cfg.name],
                    i,
                    self.stager,
                    self.inflight,
                    self.backpressure,
                    self.metrics,
                    wait,
                    on_event=self.on_event,
                )
                for watcher in self._watchers:
                    r.watch(watcher)
                r.start()
                self.threads.append(r)

    def stop(self, timeout: float | None = None, keep: bool = False) -> bool:
        """Stop every thread and wait for it, at most ``timeout`` seconds in all (a receive in
        flight gives its messages back, or with ``keep`` stages them); return whether all have ended."""
        for r in self.threads:
            r.keep = keep
            r.request_stop()
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in self.threads:
            r.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(r.running for r in self.threads)

    def watch(self, watcher: Watcher) -> None:
        """Watch every receiver, those started later too (see ``Worker.watch``)."""
        self._watchers.append(watcher)
        for r in self.threads:
            r.watch(watcher)

    def workers(self) -> list[Receiver]:
        """The receiver threads started so far."""
        return list(self.threads)


def release_in_flight(sources: Mapping[str, Source], inflight: InFlight, names: Iterable[str]) -> int:
    """Make the messages still in flight on the sources ``names`` visible again at once, so the
    next run receives them without waiting (and deduplicates them); return how many were
    released. A failure is only logged (those come back after their visibility timeout)."""
    released = 0
    for name in names:
        handles = inflight.all_handles(name)
        for start in range(0, len(handles), 100):
            try:
                sources[name].release(handles[start : start + 100])
            except Exception as err:
                log.warning("releasing in-flight messages of %s failed: %s", name, redact(str(err)))
                break
            released += len(handles[start : start + 100])
    return released
