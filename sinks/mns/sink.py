"""Alibaba Cloud MNS sink: BatchSendMessage from the executors, size-checked, partial failures re-sent."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ingest.connector import (
    CallRefused,
    Failed,
    Limits,
    RefusedRecord,
    RetryPolicy,
    SendBuffer,
    WriteReport,
    send_frame,
    write_partitions,
    write_rows,
)
from ingest.connector.claim_check import Offloader, Payload
from sinks.mns.config import MnsSinkConfig
from sources.mns.client import TRANSIENT_CODES, QueueClients, classify, error_code

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
BATCH_BYTES = 65536
"""MNS's limit on the bodies of one BatchSendMessage call, as sent."""
RECORD_ERRORS = frozenset({"InvalidArgument", "MalformedXML"})
"""Whole-call refusals that one bad entry can cause: the batch is then sent entry by entry."""
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(slots=True)
class Entry:
    """One message to send: the body as sent (encoded) and its options."""

    wire: str
    priority: int | None = None
    delay: int | None = None
    payload: Payload | None = None
    """An offloaded record's payload, put before the entry is sent (``wire`` is its pointer)."""


class MnsSink:
    """Writes each micro-batch to an MNS queue.

    Guarantee: at-least-once. MNS has no deduplication, so a replayed batch, or a send retried
    after an unanswered call, sends its messages again; consumers dedup on the body (e.g. an
    id column) if they must. MNS standard queues do not keep order.

    Rows are sent from the executors by ``MnsPartitionWriter``. Records MNS would refuse
    (empty, over ``max_body_bytes`` as sent, bad priority or delay, characters XML cannot
    carry when ``base64_body`` is off) and records MNS refused for good follow
    ``on_bad_record``: ``fail`` raises ``FatalError`` naming the source message id, ``skip``
    and ``dead_letter`` are in the write's report for the pipeline to count, log and route.

    Claim-check (``claim_check``): a record whose body as sent is over ``claim_check.threshold``
    (default ``max_body_bytes``) is put to the OSS bucket under ``key_prefix`` + ``<source
    message id>/<sha256 of the body>``, and the message body is the SQS Extended Client's pointer
    JSON instead (base64-encoded like any body with ``base64_body``; MNS messages carry no
    attributes, so no size attribute). A replay puts the same keys (no orphans). A payload that
    cannot be put fails the batch.
    """

    plan_write = False
    """``write`` sends rows from the executors (an RDD action), not one Spark SQL action."""

    def __init__(self, cfg: MnsSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        """Send ``df``'s rows; return how many MNS accepted (with the records refused for good)."""
        from pyspark.sql import functions as F

        extra = {}
        if self.cfg.priority_column:
            extra["priority"] = F.col(self.cfg.priority_column).cast("int")
        if self.cfg.delay_column:
            extra["delay"] = F.col(self.cfg.delay_column).cast("int")
        frame = send_frame(df, self.cfg, extra)
        return write_partitions(frame, MnsPartitionWriter(self.cfg).write)

    def close(self) -> None:
        pass


class MnsPartitionWriter:
    """Sends one partition's rows with BatchSendMessage; plain Python, runs on an executor.

    Rows are dicts (or Rows) with ``body``, ``source_id`` and optionally ``priority`` and
    ``delay``. Bodies are base64-encoded here (``base64_body``) so the size on the wire is
    known. This class is the MNS side of ``ingest.connector.SendBuffer``: a call carries at most
    ``batch_size`` (≤ 16) messages and 64 KB of bodies, calls run one at a time (the SDK
    client is per thread), and a partly failed call re-sends only the entries that failed for
    a retryable reason (internal errors, throttling), up to ``max_retries`` times, then raises
    ``TransientError``: the Spark batch fails and is replayed. Entries refused for good follow
    ``on_bad_record``. Without ``base64_body`` the body travels as XML text, where a ``\r``
    arrives as ``\n``.
    """

    def __init__(self, cfg: MnsSinkConfig) -> None:
        self.cfg = cfg
        self.clients = QueueClients(cfg, timeout=cfg.request_timeout)
        self.calls: list[int] = []
        """Entries per BatchSendMessage call made (for tests and metrics)."""
        self.target_name = f"MNS queue {cfg.queue_name}"
        self.call_name = f"MNS BatchSendMessage to {cfg.queue_name}"
        self.offload = Offloader(cfg.claim_check, cfg) if cfg.claim_check else None

    def entry(self, row: dict[str, Any]) -> Entry | str:
        """The entry for one frame row, or why MNS would refuse it."""
        body = row.get("body") or ""
        try:
            wire = self._wire(body)
            size, limit = len(wire.encode("utf-8")), self.cfg.max_body_bytes
        except UnicodeEncodeError as err:  # a lone surrogate: no UTF-8 for it, with or without base64
            return f"body is not valid Unicode text ({err.reason} at {err.start})"
        priority, delay = row.get("priority"), row.get("delay")
        payload = None
        if not body:
            return "empty body (MNS needs at least 1 byte)"
        if self.offload and self.offload.wanted(size, limit):
            payload = self.offload.payload(body, row.get("source_id"))
            wire = self._wire(payload.pointer)
            size = len(wire.encode("utf-8"))
        if size > limit:
            return f"{size} bytes as sent, over the {limit}-byte MNS message limit"
        if not self.cfg.base64_body and _NOT_XML.search(wire):
            return "characters XML cannot carry (set base64_body)"
        if priority is not None and not 1 <= priority <= 16:
            return f"priority {priority} is not within 1-16"
        if delay is not None and not 0 <= delay <= 604800:
            return f"delay {delay}s is not within 0-604800"
        return Entry(wire, priority, delay, payload)

    def _wire(self, body: str) -> str:
        """The body as sent: base64 of its UTF-8 bytes with ``base64_body``, else as is."""
        return base64.b64encode(body.encode("utf-8")).decode("ascii") if self.cfg.base64_body else body

    @staticmethod
    def size(entry: Entry) -> int:
        """Bytes MNS counts against a call's 64 KB: the body as sent."""
        return len(entry.wire.encode("utf-8"))

    def write(self, rows: Iterable[Any]) -> tuple[int, list[RefusedRecord]]:
        """Send every row; return (records MNS accepted, rejected records)."""
        limits = Limits(max_entries=self.cfg.batch_size, max_batch_bytes=BATCH_BYTES)
        retry = RetryPolicy(attempts=self.cfg.max_retries + 1)
        try:
            return write_rows(rows, lambda _: SendBuffer(self, limits, retry, name="mns-sink"))
        finally:
            self.clients.close()

    def send(self, entries: list[Entry]) -> list[Failed | None]:
        """One BatchSendMessage call, after putting the offloaded payloads; per entry ``None``
        (accepted) or ``Failed`` (final or retryable). A payload put fails the call (raises)."""
        from mns.queue import Message

        payloads = [e.payload for e in entries if e.payload is not None]
        if self.offload and payloads:
            self.offload.store(payloads)
        self.calls.append(len(entries))
        try:
            self.clients.queue().batch_send_message([Message(e.wire, e.delay, e.priority) for e in entries])
        except Exception as err:
            subs = getattr(err, "sub_errors", None)
            if not subs:
                raise
            return [_result(sub) for sub in subs]
        return [None] * len(entries)

    def classify(self, err: Exception) -> BaseException:
        """A whole-call refusal one bad entry can cause is ``CallRefused``; else ``classify``'s class."""
        code = error_code(err)
        if code in RECORD_ERRORS:
            return CallRefused(f"{code}: {getattr(err, 'message', err)}")
        return classify(err, self.cfg.queue_name, self.cfg.endpoint, "BatchSendMessage")


def _result(sub: dict[str, Any]) -> Failed | None:
    """One entry's result in a partly failed call: accepted, retryable (by code), or final."""
    code = sub.get("ErrorCode")
    if not code:
        return None
    if code in TRANSIENT_CODES:
        return Failed(code)
    return Failed(f"{code}: {sub.get('ErrorMessage', '')}", final=True)
