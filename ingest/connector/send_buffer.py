"""The partition writer queue sinks with a multi-entry send call share, after Flink's ``AsyncSinkWriter``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Generic

from ingest.connector.send_target import CallRefused, E, Failed, Limits, RetryPolicy, SendTarget
from ingest.connector.sink import RefusedRecord, refused_record
from ingest.errors import FatalError, IngestError, TransientError, call_with_retries, redact

log = logging.getLogger(__name__)


_Item = tuple[Any, str | None, Any]
"""(entry, source message id, body for a dead-lettered record)."""


class SendBuffer(Generic[E]):
    """One ``write`` call's buffer, in-flight calls and time-based flushing for one target.

    Rows go in with ``add``; a batch is sent when full (``max_entries`` or
    ``max_batch_bytes``), when its oldest record has waited ``max_wait`` (a ticker thread
    watches while the row iterator blocks), and at ``finish``. At most ``max_in_flight``
    calls run at once and at most ``max_buffered`` records are buffered or in flight; beyond
    that ``add`` waits. A call's failed entries are re-sent alone under the retry policy; a
    call refused whole (``CallRefused``) is re-sent entry by entry; entries refused for good
    follow ``on_bad_record`` (``fail`` raises ``FatalError``, the others land in ``rejected``).
    Once a call has failed (in this batcher, or in any sharing its ``halt`` event) or the
    batcher stops, calls not started are skipped and re-sends end; the first failure is raised.
    Under ``failOnError`` false (``RetryPolicy.endless``) a call's retryable failures never
    fail it: its entries are re-sent until the target takes them, and ``finish`` waits.

    Guarantee: at-least-once. ``finish`` returns only once every record was accepted or
    refused under the policy, or raises; a call re-sent after an unanswered one may deliver
    twice (targets with deduplication, such as SQS FIFO, drop the copy).
    """

    def __init__(
        self,
        target: SendTarget[E],
        limits: Limits,
        retry: RetryPolicy,
        name: str = "sink",
        halt: threading.Event | None = None,
    ) -> None:
        self.target, self.limits, self.retry = target, limits, retry
        self.max_buffered = max(limits.max_buffered, limits.max_entries)
        self.rejected: list[RefusedRecord] = []
        self.batch: list[_Item] = []
        self.batch_bytes, self.oldest, self.sent = 0, 0.0, 0
        self.inflight: list[tuple[Future, int]] = []
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(limits.max_in_flight, thread_name_prefix=name)
        self.stopping = threading.Event()
        self.halt = halt or threading.Event()
        self.ticker = threading.Thread(target=self._tick, name=f"{name}-ticker", daemon=True)
        if limits.max_wait is not None and limits.max_wait > 0:
            self.ticker.start()

    def add(self, row: dict[str, Any]) -> None:
        """Buffer one row's entry, or refuse it (the sink says why, or over ``max_record_bytes``)."""
        entry, source_id, body = self.target.entry(row), row.get("source_id"), row.get("body") or ""
        if isinstance(entry, str):
            return self._refuse((None, source_id, body), entry)
        size, limits = self.target.size(entry), self.limits
        if limits.max_record_bytes is not None and size > limits.max_record_bytes:
            why = f"{size} bytes, over maxRecordSizeInBytes {limits.max_record_bytes}"
            return self._refuse((entry, source_id, body), why)
        with self.lock:
            if self.batch and (
                len(self.batch) >= limits.max_entries or self.batch_bytes + size > limits.max_batch_bytes
            ):
                self._flush()
            if not self.batch:
                self.oldest = time.monotonic()
            self.batch.append((entry, source_id, body))
            self.batch_bytes += size
            if len(self.batch) >= limits.max_entries or limits.max_wait == 0:
                self._flush()
        return None

    def finish(self) -> int:
        """Send what is buffered, wait for every call; return how many records the target accepted."""
        with self.lock:
            self._flush(drain=True)
        return self.sent

    def stop(self) -> None:
        """Stop the ticker and the calls not started (after ``finish``, or when the write failed)."""
        self.stopping.set()
        self.halt.set()
        if self.ticker.is_alive():
            self.ticker.join()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _flush(self, drain: bool = False) -> None:
        """Submit the buffer (lock held); wait while over the in-flight or buffered caps, or for all."""
        if self.batch:
            self.inflight.append((self.pool.submit(self._call, self.batch), len(self.batch)))
            self.batch, self.batch_bytes = [], 0
        while self.inflight and (
            drain
            or len(self.inflight) >= self.limits.max_in_flight + self.limits.max_queued
            or sum(n for _, n in self.inflight) >= self.max_buffered
            or any(f.done() for f, _ in self.inflight)
        ):
            wait([f for f, _ in self.inflight], return_when=FIRST_COMPLETED)
            for item in [i for i in self.inflight if i[0].done()]:
                self.sent += item[0].result()  # a failed send raises here, and stays listed to raise again
                self.inflight.remove(item)

    def _tick(self) -> None:
        max_wait = self.limits.max_wait or 0.0
        while not self.stopping.wait(min(0.2, max(0.01, max_wait / 4))):
            with self.lock:
                if self.batch and time.monotonic() - self.oldest >= max_wait:
                    try:
                        self._flush()
                    except BaseException:
                        return  # the row loop's next flush, or finish(), raises it

    def _call(self, batch: list[_Item]) -> int:
        """Send one batch unless a call has failed; only the first failure raises."""
        if self.halt.is_set():
            return 0
        try:
            return self._send(batch)
        except BaseException:
            if self.halt.is_set():
                return 0  # another call failed first (that one raises), or the write stops
            self.halt.set()
            raise

    def _send(self, batch: list[_Item]) -> int:
        """Send one batch; re-send only failed retryable entries; return how many were accepted."""
        pending = dict(enumerate(batch))
        accepted = 0

        def attempt() -> None:
            nonlocal accepted
            keys = list(pending)
            try:
                results = list(self.target.send([pending[k][0] for k in keys]))
            except Exception as err:
                found = err if isinstance(err, IngestError) else self.target.classify(err)
                if not isinstance(found, CallRefused):
                    if found is err:
                        raise
                    raise found from err
                # One bad entry can fail the whole call: find it by sending entry by entry.
                for key in keys:
                    if len(keys) == 1:
                        self._refuse(pending[key], str(found))
                    else:
                        accepted += self._send([pending[key]])
                    del pending[key]  # only now: if that raised, a retry re-sends it
                return
            results += [Failed()] * (len(keys) - len(results))
            reasons = []
            for key, result in zip(keys, results, strict=False):
                if result is None:
                    del pending[key]
                    accepted += 1
                elif result.final:
                    self._refuse(pending.pop(key), result.reason)
                elif result.reason:
                    reasons.append(result.reason)
            if pending:
                self._entries_failed(list(pending.values()), reasons)

        r, started = self.retry, time.monotonic()
        limit = None if r.endless else r.max_elapsed
        what = f"sink {self.target.cfg.name}: {self.target.call_name}"
        call_with_retries(
            attempt,
            what=what + (" (failOnError false: re-sent until the target takes it)" if r.endless else ""),
            attempts=None if r.endless else r.attempts,
            initial_wait=r.initial_wait,
            max_wait=r.max_wait,
            fixed_wait=r.fixed_wait,
            give_up=lambda: self.halt.is_set() or bool(limit and time.monotonic() - started >= limit),
        )
        return accepted

    def _entries_failed(self, pending: list[_Item], reasons: list[str]) -> None:
        """Raise for entries failed for a retryable reason: transient, or fatal under failOnError."""
        ids = ", ".join(str(source_id) for _, source_id, _ in pending[:5])
        why = reasons[0] if reasons else "no answer for them"
        what = f"{self.target.call_name}: {len(pending)} entries failed (source ids {ids}; {why})"
        if self.retry.fail_on_error:
            raise FatalError(redact(f"{what}; sinks.{self.target.cfg.name}.failOnError is true"))
        raise TransientError(redact(what))

    def _refuse(self, item: _Item, reason: str) -> None:
        """Apply ``on_bad_record`` to a record the target will never take."""
        _, source_id, body = item
        self.rejected.append(
            refused_record(self.target.cfg, self.target.target_name, source_id, reason, body)
        )


def write_rows(
    rows: Iterable[Any],
    open_lane: Callable[[str], SendBuffer[Any]],
    lane_of: Callable[[dict[str, Any]], str] = lambda row: "",
) -> tuple[int, list[RefusedRecord]]:
    """Send one partition's rows (Rows or dicts); return (records accepted, records refused).

    Each row goes to the batcher of its lane (``lane_of``; one lane by default), opened by
    ``open_lane`` at the lane's first row: an empty partition opens none, makes no client and
    no call. Every batcher is finished, then stopped, also when the write fails.
    """
    lanes: dict[str, SendBuffer[Any]] = {}
    try:
        for raw in rows:
            row = raw.asDict() if hasattr(raw, "asDict") else dict(raw)
            key = lane_of(row)
            if key not in lanes:
                lanes[key] = open_lane(key)
            lanes[key].add(row)
        sent = sum(lane.finish() for lane in lanes.values())
        return sent, [r for lane in lanes.values() for r in lane.rejected]
    finally:
        for lane in lanes.values():
            lane.stop()
