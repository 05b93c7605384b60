"""One delivery target's bounded queue and its sender thread: batches, retries, a rest when it is down."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ingest.config.job_events import TargetBase
from ingest.errors import TransientError, call_with_retries, redact
from ingest.ops.job_events.channels import Channel
from ingest.worker import Worker

log = logging.getLogger("ingest.ops.job_events.delivery")


class Sender:
    """One target's bounded queue and the thread that sends it in batches.

    A batch is tried ``attempts`` times (transient errors only) with the same batch id; then
    its messages count as failed and the target rests ``dead_pause``, while what overflows
    its queue is dropped. Messages wait, uncounted, while the channel is not ready.
    """

    def __init__(
        self, channel: Channel, target: TargetBase, on_count: Callable[[str, str, int], None]
    ) -> None:
        self.channel = channel
        self.target = target
        self.on_count = on_count
        self.counts = {"delivered": 0, "dropped": 0, "failed": 0}
        self.errors = 0
        """Errors of the sender's own (not of a send), logged with their traceback."""
        self._buf: deque[dict[str, Any]] = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._batch_id = 0
        self.thread = Worker(f"delivery-{channel.name}", target=self._run)

    def _count(self, kind: str, n: int) -> None:
        # Called with self._cv held.
        if n:
            self.counts[kind] += n
            self.on_count(kind, self.channel.name, n)

    def _drop_queued(self) -> None:
        # Called with self._cv held.
        self._count("dropped", len(self._buf))
        self._buf.clear()

    def offer(self, msg: dict[str, Any]) -> None:
        """Queue ``msg``, or drop it (counted) when the queue is full or the sender is closing."""
        with self._cv:
            if self._closing or len(self._buf) >= self.target.queue_size:
                self._count("dropped", 1)
                return
            self._buf.append(msg)
            self._cv.notify()

    def _take(self) -> list[dict[str, Any]] | None:
        """The next batch (waits for the first message, then ``linger``); None when closed and empty."""
        t = self.target
        with self._cv:
            while True:
                while not self._buf and not self._closing:
                    self._cv.wait()
                if not self._buf:
                    return None
                if not self.channel.ready():
                    if self._closing:
                        self._drop_queued()
                        return None
                    self._cv.wait(0.5)
                    continue
                deadline = time.monotonic() + t.linger
                while len(self._buf) < t.batch_size and not self._closing:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                n = min(len(self._buf), t.batch_size)
                return [self._buf.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            try:
                if not self._send_next():
                    return
            except Exception:  # a bug here must not end deliveries silently
                log.exception("delivery %s: sender error; it goes on", self.channel.name)
                with self._cv:
                    self.errors += 1
                    with contextlib.suppress(Exception):  # the counting itself may be what failed
                        self.on_count("errors", self.channel.name, 1)
                    if self._cv.wait_for(lambda: self._closing, timeout=1.0):
                        self._drop_queued()
                        return

    def _send_next(self) -> bool:
        """Send the next batch with retries; False once closed and empty."""
        if (batch := self._take()) is None:
            return False
        self._batch_id = max(self._batch_id + 1, time.time_ns() // 1000)
        batch_id = self._batch_id
        try:
            call_with_retries(
                functools.partial(self.channel.send, batch, batch_id),
                what=f"delivery {self.channel.name}: {len(batch)} message(s)",
                attempts=self.target.attempts,
                initial_wait=0.2,
                max_wait=5.0,
                retry_on=(TransientError,),
            )
        except Exception as err:
            log.warning(
                "delivery %s: %d message(s) failed: %s", self.channel.name, len(batch), redact(str(err))
            )
            with self._cv:
                self._count("failed", len(batch))
                if self._cv.wait_for(lambda: self._closing, timeout=self.target.dead_pause):
                    self._drop_queued()
            return True
        with self._cv:
            self._count("delivered", len(batch))
        return True

    def start(self) -> None:
        """Start the sender thread (once)."""
        with self._cv:
            if not self.thread.started:
                self.thread.start()

    def close(self, deadline: float) -> None:
        """Send what is queued until ``deadline`` (``time.monotonic()``); drop the rest, counted."""
        self.start()  # a job that failed before start() still reports how it ended
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self.thread.join(max(0.0, deadline - time.monotonic()))
        with self._cv:
            self._drop_queued()
        if not self.thread.running:
            try:
                self.channel.close()
            except Exception as err:
                log.warning("delivery %s: close failed: %s", self.channel.name, redact(str(err)))
