"""Whether a running job can make progress: the reason ``GET /healthz`` answers 503 with, or None."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ingest.batch.info import SinkWrite
from ingest.config import JobConfig
from ingest.intake.leases import InFlight
from ingest.intake.parts import Intake
from ingest.intake.receiver import Receiver
from ingest.intake.staging import Stager
from ingest.supervisor import Supervisor


class Liveness:
    """Answers ``Job.health``: unhealthy when a background thread failed or ended unasked (the
    supervisor's first failure, the one the job exits with), the query stopped, intake has stalled
    for ``stall_limit`` seconds (``stalled``), a sink's write has lasted ``max_batch_age`` seconds
    (named: a sink that re-sends what its target refuses without end holds its batch so), or
    messages are in flight and no micro-batch finished for ``max_batch_age`` seconds. An idle job
    is healthy, and so is one that recovers: each check reads the state of the moment.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        stager: Stager,
        inflight: InFlight,
        max_batch_age: float,
        stop_requested: threading.Event,
        receivers: Callable[[], Iterable[Receiver]] = tuple,
        stall_limit: float = 60.0,
    ) -> None:
        self.supervisor = supervisor
        self.stager = stager
        self.inflight = inflight
        self.max_batch_age = max_batch_age
        self.stop_requested = stop_requested
        self.receivers = receivers
        """The receiver threads started so far (``ReceiverPool.workers``)."""
        self.stall_limit = stall_limit
        self.progress_at = time.monotonic()
        """time.monotonic() of the query's start or its last finished micro-batch."""

    @classmethod
    def of(
        cls, supervisor: Supervisor, intake: Intake, cfg: JobConfig, stop_requested: threading.Event
    ) -> Liveness:
        """The liveness of a job's (or an intake worker's) ``intake``, with the job's health limits."""
        return cls(
            supervisor,
            intake.stager,
            intake.inflight,
            cfg.metrics.health_max_batch_age,
            stop_requested,
            intake.receivers.workers,
            cfg.metrics.health_stall_limit,
        )

    def progressed(self) -> None:
        """The query started, or a micro-batch finished."""
        self.progress_at = time.monotonic()

    def reason(
        self, query: Any = None, renewing: bool = False, writing: SinkWrite | None = None
    ) -> str | None:
        """Why the job cannot make progress, or None.

        Args:
            query: the running StreamingQuery, once started.
            renewing: the query is being restarted on purpose (``LogRenewal``).
            writing: the sink write under way (``BatchHandler.writing``), if one is.
        """
        if (why := self.supervisor.unhealthy()) is not None:
            return why
        meant = self.stop_requested.is_set() or renewing
        if query is not None and not query.isActive and not meant:
            return "the Spark query stopped"
        if not meant and (why := self.stalled(query)) is not None:
            return why
        if writing is not None and (took := time.monotonic() - writing.since) > self.max_batch_age:
            endless = ", re-sending what its target refuses until it takes them" if writing.grace else ""
            return (
                f"sink {writing.sink} has not finished writing batch {writing.batch_id} in {took:.0f}s"
                f"{endless} (its errors are in the executors' log)"
            )
        age = time.monotonic() - self.progress_at
        if self.inflight.count and age > self.max_batch_age:
            return f"no micro-batch finished for {age:.0f}s with {self.inflight.count} message(s) in flight"
        return None

    def stalled(self, query: Any = None) -> str | None:
        """Why intake has stalled for more than ``stall_limit`` seconds, or None: a receiver's
        receives have failed all that time, or a receiver has been paused (staging writes failing,
        in-flight or staged caps) with no micro-batch finished or running meanwhile; a batch
        running frees room, and one that lasts is ``max_batch_age``'s to judge."""
        now = time.monotonic()
        for r in self.receivers():
            if not r.running:
                continue
            if r.failing_since is not None and (took := now - r.failing_since) > self.stall_limit:
                return f"receiver {r.label}: receives failing for {took:.0f}s: {r.failure}"
            paused = r.paused_since
            if paused is None or (took := now - max(paused, self.progress_at)) <= self.stall_limit:
                continue
            if query is not None and query.status.get("isTriggerActive"):
                continue
            cause = "in-flight/staged caps reached"
            if self.stager.failing:
                cause = f"staging writes to {self.stager.dir} are failing: {self.stager.last_error}"
            return f"intake paused ({cause}): nothing received and no micro-batch finished for {took:.0f}s"
        return None
