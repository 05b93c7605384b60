"""An intake worker (``mq-ingest intake``): a job's receivers, staging, leases and deletes, without Spark."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from checkpoints.journal import AckJournal
from checkpoints.lease import Lease
from ingest.config import JobConfig
from ingest.connector.payload_store import payload_stores
from ingest.errors import ConfigError, FatalError, redact
from ingest.intake.acker import Acker
from ingest.intake.owners import TAKING_OVER, new_worker_id, worker_dir
from ingest.intake.parts import Intake, ack_options, holds_messages
from ingest.intake.probe import probe_sources
from ingest.intake.processes import make_source
from ingest.intake.recovery import check_storage
from ingest.metrics import Metrics
from ingest.ops.drain import DrainRule
from ingest.ops.health import Endpoint
from ingest.ops.job_events import JobEvents
from ingest.ops.job_health import Liveness
from ingest.storage import store_for
from ingest.supervisor import Supervisor

log = logging.getLogger(__name__)


class IntakeWorker:
    """One intake worker of a job whose ``intake.mode`` is ``workers``. ``run()`` returns the exit code.

    It receives from the job's sources into the job's staging location, in files named after
    itself (``<id>~…``), extends the leases of what it holds, and deletes what the job tells it
    has committed (``ingest.intake.publisher.Publisher`` writes ``<staging>/_workers/<id>/acks``).
    Its lease there (``lock.<n>``, renewed every ``intake.heartbeat``) says it is alive, and until
    when the messages it holds stay hidden (``held_until``). Any number run, on any node that
    reaches the staging location; none needs Spark or a JVM. Backpressure is the job's: in-flight
    and staged caps, so a worker whose job is down stages up to them, then waits.

    A stop (``stop()``, SIGTERM): the receivers stop (a receive in flight gives its messages
    back), what is buffered is staged, and the worker waits up to ``intake.stop_timeout`` for
    the acks of all it staged, then exits 0; the job deletes the rest once committed. In a drain
    (``trigger.mode: available_now``) it stops by itself once its queues look empty and all it
    staged is acked. A worker that loses its lease (paused past ``intake.stale_after``) stops
    with exit 1.
    """

    def __init__(
        self,
        cfg: JobConfig,
        worker_id: str | None = None,
        echo: Callable[[str], object] = print,
        port: int | None = None,
        start_log: Any = None,
        reload: Callable[[], JobConfig] | None = None,
    ) -> None:
        """Build the worker; nothing runs until ``run()``.

        Args:
            cfg: the job's validated config (``intake.mode`` must be ``workers``).
            worker_id: its id (1-80 of ``A-Za-z0-9._-``); default ``<host>-<pid>-<4 hex>``.
            echo: prints its progress lines.
            port: where ``/metrics`` and ``/healthz`` listen (0: any free port); None: nowhere. Not
                ``metrics.port``, the job's: a worker beside the job would find it taken.

        Raises:
            ConfigError: ``intake.mode`` is not ``workers``, or ``worker_id`` is not a valid id.
        """
        if cfg.intake.mode != "workers":
            raise ConfigError(f"config key intake.mode: is {cfg.intake.mode!r}; workers need 'workers'")
        self.cfg = cfg
        try:
            self.id = new_worker_id(worker_id)
        except ValueError as err:  # a bad --worker-id: one error line and exit 2, as a bad config key
            raise ConfigError(str(err)) from None
        self.echo = echo
        self.port = port
        self.stop_requested = threading.Event()
        self.metrics = Metrics(cfg.name, worker=self.id)
        self.supervisor = Supervisor()
        self.sources = {s.name: make_source(s) for s in cfg.sources}
        self.dir = worker_dir(cfg.staging.dir, self.id)
        # Its events are made below; the receivers report through them once started.
        intake = Intake(
            cfg, self.sources, self.metrics, lambda name, text: self.events.event(name, text), self.id
        )
        self.inflight, self.stager, self.keeper = intake.inflight, intake.stager, intake.keeper
        self.receivers = intake.receivers
        self.acker = Acker(
            None,  # the job writes a batch's acks here only once it has committed
            AckJournal(self.dir, shared=True),
            self.sources,
            inflight=self.inflight,
            metrics=self.metrics,
            **ack_options(cfg, payload_stores(self.sources), self.dir),
        )
        self.lease = Lease(
            store_for(self.dir),
            cfg.intake.heartbeat,
            cfg.intake.stale_after,
            on_lost=lambda why: self.supervisor.fail(FatalError(why)),
            details=self._details,
            what="intake worker",
            fence=True,
        )
        self.events: JobEvents = JobEvents(
            cfg, self.metrics, lambda: None, self.sources, start_log, reload, worker=self.id
        )
        self.liveness = Liveness.of(self.supervisor, intake, cfg, self.stop_requested)
        self.state = "starting"
        self.endpoint: Endpoint | None = None
        self._acked = 0

    def run(self) -> int:
        """Run until stopped (or, in a drain, until its queues are drained); return the exit code."""
        check_storage(self.cfg, only="staging.dir")  # all a worker reads and writes
        self._take_lease()
        self.events.start()
        code = 1
        try:
            code = self._run()
        finally:
            self.events.close("FINISHED" if code == 0 else "FAILED", self._error())
            self.lease.release()
        return code

    def _take_lease(self) -> None:
        """Take its lease. While the job holds it, taking over a gone worker of this id (a restart's
        predecessor: it deletes that one's committed messages, then removes the folder), wait for it,
        up to ``stale_after`` and a heartbeat; a live worker of this id refuses the start at once."""
        patience = time.monotonic() + self.cfg.intake.stale_after + self.cfg.intake.heartbeat
        while True:
            try:
                return self.lease.acquire()
            except ConfigError:
                if not self.lease.previous.get(TAKING_OVER) or time.monotonic() >= patience:
                    raise
            time.sleep(0.1)

    def _run(self) -> int:
        for source in self.sources.values():
            if line := source.prepare():
                self.echo(line)
        drain = self.cfg.trigger.mode == "available_now"
        probe_sources(self.sources.values(), drain=drain)
        try:
            for part in (self.keeper, self.acker, self.stager, self.receivers):
                self.supervisor.start(part)
            if self.port is not None:
                self.endpoint = Endpoint(self.metrics.registry, self.health, self.cfg.metrics.host, self.port)
                self.supervisor.start(self.endpoint)
            self.state = "running"
            where = f"; /healthz on port {self.endpoint.port}" if self.endpoint is not None else ""
            into = self.cfg.staging.dir
            self.echo(f"intake worker {self.id} of job {self.cfg.name} receiving into {into}{where}")
            self.events.started()
            self._loop(drain)
        finally:
            self._shutdown()
        failure = self.supervisor.failure
        if failure is not None:
            self.echo(f"error: intake worker {self.id}: {redact(str(failure))}")
            return 1
        return 0

    def _loop(self, drain: bool) -> None:
        rule = DrainRule(self.cfg.trigger.idle_rounds, 0)
        while not self.stop_requested.is_set() and not self.supervisor.failed.is_set():
            if len(self.acker.acked_batches) != self._acked:
                self._acked = len(self.acker.acked_batches)
                self.liveness.progressed()
            busy = holds_messages(self.inflight, self.acker, self.stager)
            if drain and rule.drained(busy, self.receivers.threads):
                self.echo(f"intake worker {self.id}: queues drained and every staged message acked")
                self.state = "drained"
                return
            self.stop_requested.wait(0.05 if drain else 0.2)

    def stop(self) -> None:
        """Ask for a graceful stop (see the class docstring)."""
        if not self.stop_requested.is_set():
            self.stop_requested.set()
            self.events.event("STOPPING", "stop requested")

    def _shutdown(self) -> None:
        if self.state == "running":
            self.state = "stopping"
        self.receivers.stop()  # a receive in flight gives its messages back
        self.stager.stop()  # what is buffered is staged
        deadline = time.monotonic() + self.cfg.intake.stop_timeout
        while holds_messages(self.inflight, self.acker, self.stager) and not self.supervisor.failed.is_set():
            if time.monotonic() >= deadline:
                self.echo(
                    f"intake worker {self.id}: {self.inflight.count} staged message(s) not yet acked after "
                    f"{self.cfg.intake.stop_timeout:.0f}s; the job deletes them once committed"
                )
                break
            self.acker.notify()
            time.sleep(0.05)
        self.supervisor.stop()  # the acker's last pass ran; the keeper stops extending
        if self.state == "stopping":
            self.state = "stopped"
        for source in self.sources.values():
            source.close()

    def health(self) -> str | None:
        """Why the worker cannot make progress (``GET /healthz`` answers 503 with it), or None."""
        why = self.liveness.reason()
        if why is None or self.supervisor.unhealthy() is not None:
            return why
        return f"{why}; waiting for job {self.cfg.name} to commit the batches that read its staged files"

    def _details(self) -> dict[str, Any]:
        """What its lease records beside the renewal: until when its messages stay hidden, and its state."""
        now = time.time()
        shortest = min((s.visibility_timeout for s in self.cfg.sources), default=0.0)
        first = self.inflight.hidden_for()
        return {
            "held_until": now + (shortest if first is None else min(shortest, first)),
            "state": self.state,
            "in_flight": self.inflight.count,
            "staged": self.stager.files_written,
        }

    def _error(self) -> str | None:
        failure = self.supervisor.failure
        return redact(str(failure)) if failure is not None else None
