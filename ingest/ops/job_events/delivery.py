"""Job event delivery: the job reports its start log, events and resource figures to configured channels.

``Delivery`` never blocks or fails the data path: each target has a bounded queue and a
sender thread; a full queue or a dead target drops messages, and every message ends up
counted as ``delivered``, ``dropped`` or ``failed`` for its target. Changed settings are
applied while the job runs (``reconfigure``; ``ingest.ops.job_events`` re-reads the job's config
every 10 s). Field meanings and the Spark mapping of the
resource figures: `ingest.ops.job_events.messages` and `ingest.ops.job_events.resources`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ingest.config.job_events import DeliveryConfig
from ingest.errors import redact
from ingest.ops.job_events.channels import build_channel
from ingest.ops.job_events.messages import (
    EVENT,
    QUOTA,
    START_LOG,
    USAGE,
    Identity,
    MessageFactory,
    StartLogCapture,
)
from ingest.ops.job_events.resources import ResourceSampler
from ingest.ops.job_events.sender import Sender
from ingest.worker import Worker

__all__ = ["Delivery", "Sender", "StartLogCapture"]

log = logging.getLogger(__name__)


class Delivery:
    """Reports the job's life to the ``delivery`` targets (see the module docstring).

    Call order: ``start()`` (sends STARTING), ``event(...)`` as things happen,
    ``started()`` once the query runs (sends RUNNING and the start log), ``close(state)``.
    Every method returns at once except ``close``, which waits at most ``flush_timeout``.
    RESOURCE_QUOTA goes out every ``quota_interval`` from ``start()``; JOB_RESOURCE_USAGE every
    ``usage_interval`` from ``started()`` and once more at close, for streaming jobs only (as
    the reference: a drain, ``available_now``, is a batch job and sends none).
    """

    def __init__(
        self,
        cfg: DeliveryConfig,
        job_name: str,
        metrics: Any,
        spark_provider: Callable[[], Any],
        sources: dict[str, Any],
        capture: StartLogCapture | None = None,
        streaming: bool = True,
        worker: str | None = None,
    ) -> None:
        """Build the targets' channels (no thread runs and nothing is sent until ``start``).

        Args:
            cfg: the ``delivery`` section.
            job_name: the job's name (default ``deploymentName``; seeds the default ``deploymentId``).
            metrics: the job's ``Metrics`` (``total``, ``collect``, and ``inc`` for the counters).
            spark_provider: returns the job's SparkSession, or None while there is none.
            sources: the job's sources by name; those that declare ``reports_lag`` report their backlog.
            capture: a start-log handler attached before the config was loaded, if any.
            streaming: the job streams until stopped (``processing_time``); False for a drain.
            worker: the id of the intake worker reporting (``mq-ingest intake``), named in each of
                its events; None for the job itself.
        """
        self.cfg = cfg
        self.metrics = metrics
        self.identity = Identity(
            deploymentId=cfg.deployment_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"mq-ingest:{job_name}")),
            deploymentName=cfg.deployment_name or job_name,
            jobId=str(uuid.uuid4()),
            tag=cfg.tag,
            workspace=cfg.workspace,
            namespace=cfg.namespace,
        )
        self.factory = MessageFactory(self.identity)
        self.capture = capture or StartLogCapture()
        self.capture.max_chars = cfg.start_log_max_chars
        self.capture.setLevel(cfg.start_log_level)
        self.sampler = ResourceSampler(spark_provider, sources, job_name)
        self._spark_provider = spark_provider
        self.job_name = job_name
        self.who = f"intake worker {worker} of job {job_name}" if worker else f"job {job_name}"
        self._prefix = f"intake worker {worker}: " if worker else ""
        self.senders: dict[str, Sender] = {}
        if cfg.enabled:
            for name, target in zip(cfg.target_names(), cfg.targets, strict=True):
                self.senders[name] = Sender(
                    build_channel(target, name, spark_provider), target, self._counted
                )
        self._lock = threading.RLock()  # reentrant: event() may run in a signal handler
        self._running_since: float | None = None
        self.streaming = streaming
        self._start_log_sent = False
        self._closed = False
        self._ticker = Worker("delivery-ticker", target=self._tick)

    # ----- API for the pipeline -------------------------------------------------------

    def log_handler(self) -> logging.Handler:
        """The start-log handler (the ``capture`` given, or a new one); attach it to the root logger.

        It stops capturing by itself once the start log is sent; remove it after ``close``.
        """
        return self.capture

    def start(self) -> None:
        """Start the sender threads and the resource ticker; send STARTING."""
        for sender in self.senders.values():
            sender.start()
        if self.senders:
            self._ticker.start()
        self._event("STARTING", f"{self.who} starting on {socket.gethostname()} (pid {os.getpid()})")

    def event(self, name: str, content: str) -> None:
        """Send one JOB_EVENT (``content`` is redacted; an intake worker's names it). Never raises,
        never waits."""
        self._event(name, self._prefix + content)

    def _event(self, name: str, content: str) -> None:
        self._emit(EVENT, lambda: [self.factory.event(name, content)])

    def started(self) -> None:
        """The job runs (query active or first batch done): send RUNNING and the start log, once.

        The start log ends here (with a line about the Spark application); capturing stops.
        """
        with self._lock:
            if self._running_since is not None or self._closed:
                return
            self._running_since = time.monotonic()
        spark = self.sampler.describe_spark() if self.senders else None
        self._event("RUNNING", f"{self.who} running" + (f"; {spark}" if spark else ""))
        self._send_start_log(spark)

    def close(self, final_state: str, error: str | None = None) -> None:
        """Report the end of the run, flush for at most ``flush_timeout``, and stop. Idempotent.

        Sends the ``final_state`` event (FINISHED, FAILED…) with ``error`` as its content, the
        start log if it was not sent yet, and a last JOB_RESOURCE_USAGE if the job ran. What
        is still queued at the deadline is dropped (counted). Call it before ``spark.stop()``.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._event(final_state, self._prefix + error if error else f"{self.who} {final_state.lower()}")
        self._send_start_log(None)
        if self._running_since is not None and self.streaming:
            self._emit(USAGE, self._usage)
        self._ticker.stop(5.0)
        deadline = time.monotonic() + self.cfg.flush_timeout
        for sender in self.senders.values():
            sender.close(deadline)

    def counters(self) -> dict[str, dict[str, int]]:
        """Per target: messages ``delivered``, ``dropped`` (queue full, dead, closing) and ``failed``."""
        return {name: dict(s.counts) for name, s in self.senders.items()}

    def reconfigure(self, cfg: DeliveryConfig) -> bool:
        """Take changed delivery settings while the job runs (targets, scope, intervals); the
        job's identity stays. The new targets start at once; the old ones get what they hold
        sent, for at most ``flush_timeout``, then close. Returns whether anything changed."""
        with self._lock:
            if self._closed or cfg == self.cfg:
                return False
            old = self.senders
            self.senders = {}
            if cfg.enabled:
                for name, target in zip(cfg.target_names(), cfg.targets, strict=True):
                    self.senders[name] = Sender(
                        build_channel(target, name, self._spark_provider), target, self._counted
                    )
            self.cfg = cfg
            for sender in self.senders.values():
                sender.start()
            if self.senders and not self._ticker.running:  # not closed: checked above
                self._ticker.start()
        deadline = time.monotonic() + cfg.flush_timeout
        for sender in old.values():
            sender.close(deadline)
        log.info("delivery: settings changed; targets now %s", sorted(self.senders))
        return True

    # ----- internals ------------------------------------------------------------------

    def _emit(self, kind: str, build: Callable[[], list[dict[str, Any]]]) -> None:
        if not self.senders or kind not in self.cfg.scope:
            return
        try:
            for msg in build():
                for sender in self.senders.values():
                    sender.offer(msg)
        except Exception as err:
            log.warning("delivery: %s not sent: %s", kind, redact(str(err)))

    def _send_start_log(self, spark: str | None) -> None:
        with self._lock:
            if self._start_log_sent:
                return
            self._start_log_sent = True
        if spark:
            self.capture.add_line(spark)
        # Again at send time: lines logged before the config registered its secrets are masked too.
        text = redact(self.capture.stop())
        self._emit(START_LOG, lambda: self.factory.start_log(text, self.cfg.start_log_part_chars))

    def _counted(self, kind: str, channel: str, n: int) -> None:
        # Mirrored into the job's metrics when they have the delivery counters.
        with contextlib.suppress(KeyError, AttributeError):
            self.metrics.inc(f"delivery{kind.capitalize()}", n, channel=channel)

    def _quota(self) -> list[dict[str, Any]]:
        figures, queue_name = self.sampler.quota()
        return [self.factory.quota(figures, queue_name)]

    def _usage(self) -> list[dict[str, Any]]:
        return [self.factory.usage(**self.sampler.usage(self.metrics))]

    def _tick(self) -> None:
        next_quota = time.monotonic() + self.cfg.quota_interval
        next_usage: float | None = None
        stopping = self._ticker.stopping
        while not stopping.is_set():
            now = time.monotonic()
            if next_usage is None and self._running_since is not None and self.streaming:
                next_usage = self._running_since + self.cfg.usage_interval
            if now >= next_quota:
                self._emit(QUOTA, self._quota)
                next_quota = now + self.cfg.quota_interval
            if next_usage is not None and now >= next_usage:
                self._emit(USAGE, self._usage)
                next_usage = now + self.cfg.usage_interval
            wake = min(next_quota, next_usage or next_quota)
            # Re-check at least every second so started() moves the usage schedule promptly.
            stopping.wait(min(max(0.0, wake - time.monotonic()), 1.0))
