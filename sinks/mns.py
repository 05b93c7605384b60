"""Alibaba Cloud MNS sink: BatchSendMessage from the executors, size-checked, partial failures re-sent."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ingest.config.sinks import MnsSinkConfig
from ingest.errors import TransientError, call_with_retries, redact
from sinks.base import WriteReport, refused_record
from sinks.frame import send_frame, write_partitions
from sources.mns_client import TRANSIENT_CODES, QueueClients, classify, error_code

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
    """One message to send: the body as sent (encoded), its options, and where it came from."""

    wire: str
    body: str
    source_id: str | None
    priority: int | None = None
    delay: int | None = None


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
    """

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
    known: a call carries at most ``batch_size`` (≤ 16) messages and 64 KB of bodies. Calls
    run one at a time (the SDK client is per thread). A partly failed call re-sends only the
    entries that failed for a retryable reason (internal errors, throttling), up to
    ``max_retries`` times, then raises ``TransientError``: the Spark batch fails and is
    replayed. Entries refused for good follow ``on_bad_record``. Without ``base64_body`` the
    body travels as XML text, where a ``\r`` arrives as ``\n``.
    """

    def __init__(self, cfg: MnsSinkConfig) -> None:
        self.cfg = cfg
        self.clients = QueueClients(cfg, timeout=cfg.request_timeout)
        self.calls: list[int] = []
        """Entries per BatchSendMessage call made (for tests and metrics)."""

    def entry(self, row: dict[str, Any]) -> Entry | str:
        """The entry for one frame row, or why MNS would refuse it."""
        body = row.get("body") or ""
        wire = base64.b64encode(body.encode("utf-8")).decode("ascii") if self.cfg.base64_body else body
        size, limit = len(wire.encode("utf-8")), self.cfg.max_body_bytes
        priority, delay = row.get("priority"), row.get("delay")
        if not body:
            return "empty body (MNS needs at least 1 byte)"
        if size > limit:
            return f"{size} bytes as sent, over the {limit}-byte MNS message limit"
        if not self.cfg.base64_body and _NOT_XML.search(body):
            return "characters XML cannot carry (set base64_body)"
        if priority is not None and not 1 <= priority <= 16:
            return f"priority {priority} is not within 1-16"
        if delay is not None and not 0 <= delay <= 604800:
            return f"delay {delay}s is not within 0-604800"
        return Entry(wire, body, row.get("source_id"), priority, delay)

    def write(self, rows: Iterable[Any]) -> tuple[int, list[dict]]:
        """Send every row; return (records MNS accepted, rejected records)."""
        sent = 0
        rejected: list[dict] = []
        batch: list[Entry] = []
        size = 0
        try:
            for raw in rows:
                row = raw.asDict() if hasattr(raw, "asDict") else dict(raw)
                entry = self.entry(row)
                if isinstance(entry, str):
                    self.reject(row.get("body") or "", row.get("source_id"), entry, rejected)
                    continue
                n = len(entry.wire.encode("utf-8"))
                if batch and (len(batch) >= self.cfg.batch_size or size + n > BATCH_BYTES):
                    sent += self.send(batch, rejected)
                    batch, size = [], 0
                batch.append(entry)
                size += n
            if batch:
                sent += self.send(batch, rejected)
            return sent, rejected
        finally:
            self.clients.close()

    def send(self, batch: list[Entry], rejected: list[dict]) -> int:
        """Send one batch; re-send only failed retryable entries; return how many MNS accepted."""
        from mns.queue import Message

        pending, accepted = list(batch), 0

        def attempt() -> None:
            nonlocal pending, accepted
            self.calls.append(len(pending))
            messages = [Message(e.wire, e.delay, e.priority) for e in pending]
            try:
                self.clients.queue().batch_send_message(messages)
            except Exception as err:
                code, subs = error_code(err), getattr(err, "sub_errors", None)
                if not subs and code in RECORD_ERRORS and len(pending) == 1:
                    why = f"{code}: {getattr(err, 'message', err)}"
                    self.reject(pending[0].body, pending[0].source_id, why, rejected)
                    pending = []
                    return
                if not subs and code in RECORD_ERRORS:
                    # One bad entry can fail the whole call: find it by sending entry by entry.
                    while pending:
                        accepted += self.send([pending[0]], rejected)
                        pending.pop(0)  # only now: if that raised, a retry re-sends the rest
                    return
                if not subs:
                    raise classify(err, self.cfg.queue_name, self.cfg.endpoint, "BatchSendMessage") from err
                retry, reasons = [], []
                for entry, sub in zip(pending, subs, strict=False):
                    bad = sub.get("ErrorCode")
                    if not bad:
                        accepted += 1
                    elif bad in TRANSIENT_CODES:
                        retry.append(entry)
                        reasons.append(bad)
                    else:
                        self.reject(
                            entry.body, entry.source_id, f"{bad}: {sub.get('ErrorMessage', '')}", rejected
                        )
                pending = retry
                if pending:
                    ids = ", ".join(str(e.source_id) for e in pending[:5])
                    what = f"MNS BatchSendMessage to {self.cfg.queue_name}: {len(pending)} entries failed"
                    raise TransientError(redact(f"{what} (source ids {ids}; {reasons[0]})")) from err
                return
            accepted += len(pending)
            pending = []

        call_with_retries(attempt, attempts=self.cfg.max_retries + 1)
        return accepted

    def reject(self, body: str, source_id: str | None, reason: str, rejected: list[dict]) -> None:
        """Apply ``on_bad_record`` to a record MNS will never take."""
        target = f"MNS queue {self.cfg.queue_name}"
        rejected.append(refused_record(self.cfg, target, source_id, reason, body))
