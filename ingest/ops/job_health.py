"""Whether a running job can make progress: the reason ``GET /healthz`` answers 503 with, or None."""

from __future__ import annotations

import threading
import time
from typing import Any

from ingest.batch.info import SinkWrite
from ingest.intake.leases import InFlight
from ingest.intake.staging import Stager
from ingest.supervisor import Supervisor


class Liveness:
    """Answers ``Job.health``: unhealthy when a background thread failed or ended unasked (the
    supervisor's first failure, the one the job exits with), staging writes fail, the query
    stopped, a sink's write has lasted ``max_batch_age`` seconds (named: a sink that re-sends
    what its target refuses without end holds its batch so), or messages are in flight and no
    micro-batch finished for ``max_batch_age`` seconds. An idle job is healthy.
    """

    def __init__(
        self,
        supervisor: Supervisor,
        stager: Stager,
        inflight: InFlight,
        max_batch_age: float,
        stop_requested: threading.Event,
    ) -> None:
        self.supervisor = supervisor
        self.stager = stager
        self.inflight = inflight
        self.max_batch_age = max_batch_age
        self.stop_requested = stop_requested
        self.progress_at = time.monotonic()
        """time.monotonic() of the query's start or its last finished micro-batch."""

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
        if self.stager.failing:
            return f"staging writes to {self.stager.dir} are failing (retrying)"
        meant = self.stop_requested.is_set() or renewing
        if query is not None and not query.isActive and not meant:
            return "the Spark query stopped"
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
