"""AWS SQS sink (standard and FIFO): SendMessageBatch from the executors, bounded and partially retried."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from ingest.config.sinks import SqsSinkConfig
from ingest.errors import FatalError, TransientError, call_with_retries, redact
from sinks.base import META, WriteReport, refused_record
from sinks.frame import send_frame, write_partitions
from sources.sqs_client import (
    BINARY_PREFIX,
    ClientFactory,
    classify,
    entry_is_final,
    error_code,
    resolve_region,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters SQS refuses in a body; it allows #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF."""

log = logging.getLogger(__name__)
FALLBACK_MAX_MESSAGE = 256 * 1024
MAX_ATTRIBUTES = 10
"""SQS takes at most this many message attributes per message."""
"""Used when the queue's MaximumMessageSize cannot be read (no sqs:GetQueueAttributes)."""
RECORD_ERRORS = frozenset({"InvalidParameterValue", "InvalidMessageContents", "BatchRequestTooLong"})
"""Whole-batch refusals that one bad entry can cause: the batch is then sent entry by entry."""
_queue_max: dict[str, int] = {}
_queue_max_lock = threading.Lock()


def dedup_id(source_id: str | None, body: str) -> str:
    """MessageDeduplicationId: sha256 hex of the source message id and the body.

    The body is part of it because a transform may turn one source message into several
    rows; a replayed batch produces the same rows, hence the same ids, and SQS drops them.
    """
    return hashlib.sha256(f"{source_id or ''}\n{body}".encode()).hexdigest()


class SqsSink:
    """Writes each micro-batch to an SQS queue, standard or FIFO (Flink SQS sink options).

    Guarantee: at-least-once on standard queues (a replayed batch is sent again); on FIFO
    targets exactly-once within SQS's 5-minute deduplication window, because every
    ``MessageDeduplicationId`` is derived from the source message id (``_meta.message_id``),
    so SQS drops what a replayed batch sends again. FIFO rows go out grouped by
    ``MessageGroupId`` in arrival order, one call at a time per partition.

    A batch ends complete, or raises (the Spark batch fails and is replayed: nothing is
    lost). Records SQS refuses for good, or over ``maxRecordSizeInBytes``, follow
    ``on_bad_record``: ``fail`` raises naming the source message id, ``skip`` and
    ``dead_letter`` are in the write's report for the pipeline to count and route.
    """

    def __init__(self, cfg: SqsSinkConfig) -> None:
        region = resolve_region(cfg.url, cfg.region, cfg.profile, f"sinks.{cfg.name}.aws.region")
        self.cfg = cfg = cfg.model_copy(update={"region": region})  # resolved here, not on executors
        self.name = cfg.name
        self.fifo = cfg.url.endswith(".fifo")

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        """Send ``df``'s rows; return how many SQS accepted (with the records refused for good)."""
        from pyspark.sql import functions as F

        meta = set(df.select(f"{META}.*").columns) if META in df.columns else set()
        extra = {}
        if self.fifo:
            group = F.col(f"{META}.group_id") if "group_id" in meta else F.lit(None)
            group = F.col(self.cfg.group_column) if self.cfg.group_column else group
            extra["group_id"] = F.coalesce(group.cast("string"), F.lit("default"))
            if self.cfg.dedup_id_column:
                extra["dedup_id"] = F.col(self.cfg.dedup_id_column).cast("string")
            has_arrival = "arrival" in meta
            extra["arrival"] = F.col(f"{META}.arrival") if has_arrival else F.monotonically_increasing_id()
        for name in self.cfg.attribute_columns:
            extra[f"attr_{name}"] = F.col(name).cast("string")
        if self.cfg.forward_attributes and "message_attributes" in meta:
            extra["forward"] = F.col(f"{META}.message_attributes")
            types = (
                F.col(f"{META}.message_attribute_types") if "message_attribute_types" in meta else F.lit(None)
            )
            extra["forward_types"] = types
        if self.cfg.delay_column:
            extra["delay"] = F.col(self.cfg.delay_column).cast("int")
        if self.cfg.queue_url_column:
            extra["queue_url"] = F.col(self.cfg.queue_url_column).cast("string")
        frame = send_frame(df, self.cfg, extra)
        if self.fifo:
            # A group in one partition, in arrival order, sent one call at a time: queue order is kept.
            frame = frame.repartition("group_id").sortWithinPartitions("group_id", "arrival")
        return write_partitions(frame, SqsPartitionWriter(self.cfg).write)

    def close(self) -> None:
        """Nothing to do: writers' clients live with their executor process."""


class SqsPartitionWriter:
    """Sends one partition's rows with SendMessageBatch; plain Python, runs on an executor.

    Rows are dicts (or Rows) with ``body``, ``source_id`` and optionally ``group_id``,
    ``dedup_id`` and ``attr_<name>``. Entries are batched up to ``maxBatchSize`` entries and
    ``maxBatchSizeInBytes``; a batch is sent when full, when its oldest record has waited
    ``maxTimeInBufferMS`` (a ticker thread watches while the row iterator blocks), and at
    the end. At most ``maxInFlightRequests`` calls run at once (1 for FIFO, to keep group
    order) and at most ``maxBufferedRequests`` records are buffered or in flight; beyond
    that the row loop waits. A partial failure re-sends only the failed entries: retryable
    ones up to ``max_retries`` times (``failOnError`` true: none), then the partition
    raises. Entries failed for good (``entry_is_final``) follow ``on_bad_record``.
    """

    def __init__(self, cfg: SqsSinkConfig) -> None:
        self.cfg = cfg
        self.fifo = cfg.url.endswith(".fifo")
        self.clients = ClientFactory(cfg, shared=True)

    def limits(self) -> tuple[int, int]:
        """(record, batch) byte limits; unset ones are the queue's MaximumMessageSize."""
        record, batch = self.cfg.max_record_size_in_bytes, self.cfg.max_batch_size_in_bytes
        if not (record and batch):
            record, batch = record or self._queue_max(), batch or self._queue_max()
        return min(record, batch), batch

    def _queue_max(self) -> int:
        """The queue's MaximumMessageSize, read once per process (needs sqs:GetQueueAttributes)."""

        def get() -> int:
            try:
                resp = self.clients.client().get_queue_attributes(
                    QueueUrl=self.cfg.url, AttributeNames=["MaximumMessageSize"]
                )
                return int(resp["Attributes"].get("MaximumMessageSize", FALLBACK_MAX_MESSAGE))
            except Exception as err:
                if error_code(err)[0] in ("AccessDenied", "AccessDeniedException"):
                    log.warning("no sqs:GetQueueAttributes on %s: assuming 256 KiB messages", self.cfg.url)
                    return FALLBACK_MAX_MESSAGE
                raise classify(err, self.cfg.url, "GetQueueAttributes") from err

        with _queue_max_lock:
            if self.cfg.url not in _queue_max:
                _queue_max[self.cfg.url] = call_with_retries(get, attempts=self.cfg.max_retries + 1)
            return _queue_max[self.cfg.url]

    def entry(self, row: dict[str, Any]) -> dict[str, Any]:
        """The SendMessageBatch entry (without ``Id``) for one frame row."""
        body = row["body"] if row.get("body") is not None else ""
        entry: dict[str, Any] = {"MessageBody": body}
        attrs = {
            k[5:]: {"DataType": "String", "StringValue": v}
            for k, v in row.items()
            if k.startswith("attr_") and v is not None
        }
        attrs |= self._forwarded(row, len(attrs))
        if attrs:
            entry["MessageAttributes"] = attrs
        if self.fifo:
            entry["MessageGroupId"] = row.get("group_id") or "default"
            entry["MessageDeduplicationId"] = row.get("dedup_id") or dedup_id(row.get("source_id"), body)
        elif row.get("delay") is not None:
            entry["DelaySeconds"] = row["delay"]
        elif self.cfg.delay_seconds:
            entry["DelaySeconds"] = self.cfg.delay_seconds
        return entry

    def _forwarded(self, row: dict[str, Any], taken: int) -> dict[str, dict[str, Any]]:
        """The source message's attributes, typed as received, in name order, within SQS's 10."""
        values, types = row.get("forward") or {}, row.get("forward_types") or {}
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(values):
            if taken + len(out) >= MAX_ATTRIBUTES:
                break
            value = values[name]
            if value is None or name.startswith(tuple(self.cfg.forward_exclude_prefixes)):
                continue
            kind = types.get(name) or "String"
            if kind.startswith("Binary") and value.startswith(BINARY_PREFIX):
                out[name] = {"DataType": kind, "BinaryValue": base64.b64decode(value[len(BINARY_PREFIX) :])}
            else:
                out[name] = {
                    "DataType": kind if not kind.startswith("Binary") else "String",
                    "StringValue": value,
                }
        return out

    @staticmethod
    def size(entry: dict[str, Any]) -> int:
        """Bytes SQS counts: the body plus each attribute's name, type and value."""
        n = len(entry["MessageBody"].encode())
        for name, value in entry.get("MessageAttributes", {}).items():
            data = value["BinaryValue"] if "BinaryValue" in value else value["StringValue"].encode()
            n += len(name.encode()) + len(value["DataType"]) + len(data)
        return n

    def write(self, rows: Iterable[Any]) -> tuple[int, list[dict]]:
        """Send every row; return (records SQS accepted, rejected records)."""
        lanes: dict[str, tuple[SqsPartitionWriter, _Run, int]] = {}
        try:
            for raw in rows:  # an empty partition makes no client and no call
                row = raw.asDict() if hasattr(raw, "asDict") else dict(raw)
                url = row.get("queue_url") or self.cfg.url
                if url not in lanes:
                    writer = (
                        self
                        if url == self.cfg.url
                        else SqsPartitionWriter(self.cfg.model_copy(update={"url": url}))
                    )
                    record_limit, batch_limit = writer.limits()
                    lanes[url] = (writer, _Run(writer, batch_limit), record_limit)
                writer, run, record_limit = lanes[url]
                writer.add(row, run, record_limit)
            sent = sum(run.finish() for _, run, _ in lanes.values())
            return sent, [r for _, run, _ in lanes.values() for r in run.rejected]
        finally:
            for _, run, _ in lanes.values():
                run.stop()

    def add(self, row: dict[str, Any], run: _Run, record_limit: int) -> None:
        """Buffer one row's entry in ``run``, or refuse it (a character SQS forbids, too large)."""
        entry = self.entry(row)
        n = self.size(entry)
        bad_char = _FORBIDDEN.search(entry["MessageBody"])
        if bad_char:
            code, at = ord(bad_char.group()), bad_char.start()
            why = f"body has character U+{code:04X} at {at}, which SQS does not allow"
            self.reject(entry, row.get("source_id"), why, run.rejected)
        elif n <= record_limit:
            run.add(entry, row.get("source_id"), n)
        else:
            why = f"{n} bytes, over maxRecordSizeInBytes {record_limit}"
            self.reject(entry, row.get("source_id"), why, run.rejected)

    def send(self, batch: list[tuple[dict, str | None]], rejected: list[dict]) -> int:
        """Send one batch; re-send only failed retryable entries; return how many SQS accepted."""
        pending = {str(i): item for i, item in enumerate(batch)}
        accepted = 0

        def attempt() -> None:
            nonlocal accepted
            entries = [{"Id": i, **entry} for i, (entry, _) in pending.items()]
            try:
                resp = self.clients.client().send_message_batch(QueueUrl=self.cfg.url, Entries=entries)
            except Exception as err:
                code, message, _ = error_code(err)
                if code.rsplit(".", 1)[-1] not in RECORD_ERRORS:
                    raise classify(err, self.cfg.url, "SendMessageBatch") from err
                # One bad entry can fail the whole call: find it by sending entry by entry.
                for key in list(pending):
                    if len(entries) == 1:
                        self.reject(*pending[key], f"{code}: {message}", rejected)
                    else:
                        accepted += self.send([pending[key]], rejected)
                    del pending[key]  # only now: if that raised, a retry re-sends it
                return
            for ok in resp.get("Successful", []):
                pending.pop(ok["Id"])
                accepted += 1
            retryable = []
            for bad in resp.get("Failed", []):
                reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
                if entry_is_final(bad):
                    entry, source_id = pending.pop(bad["Id"])
                    self.reject(entry, source_id, reason, rejected)
                else:
                    retryable.append(reason)
            if pending:
                ids = ", ".join(str(source_id) for _, source_id in list(pending.values())[:5])
                what = f"SendMessageBatch to {self.cfg.url}: {len(pending)} entries failed "
                what += f"(source ids {ids}; {retryable[0] if retryable else 'no answer for them'})"
                if self.cfg.fail_on_error:
                    raise FatalError(redact(f"{what}; sinks.{self.cfg.name}.failOnError is true"))
                raise TransientError(redact(what))

        cfg, started = self.cfg, time.monotonic()
        limit = cfg.backoff_max_elapsed_time
        call_with_retries(
            attempt,
            attempts=cfg.max_retries + 1,
            initial_wait=cfg.backoff_initial_interval,
            max_wait=cfg.backoff_max_interval,
            give_up=(lambda: time.monotonic() - started >= limit) if limit else None,
        )
        return accepted

    def reject(self, entry: dict, source_id: str | None, reason: str, rejected: list[dict]) -> None:
        """Apply ``on_bad_record`` to a record SQS will never take."""
        rejected.append(refused_record(self.cfg, self.cfg.url, source_id, reason, entry["MessageBody"]))


class _Run:
    """One ``write`` call's buffer, in-flight calls and time-based flushing."""

    def __init__(self, writer: SqsPartitionWriter, batch_limit: int) -> None:
        cfg = writer.cfg
        self.writer, self.batch_limit, self.max_entries = writer, batch_limit, cfg.max_batch_size
        self.max_inflight = 1 if writer.fifo else cfg.max_in_flight_requests
        self.max_buffered = max(cfg.max_buffered_requests, cfg.max_batch_size)
        self.max_wait = cfg.max_time_in_buffer_ms / 1000
        self.rejected: list[dict] = []
        self.batch: list[tuple[dict, str | None]] = []
        self.batch_bytes, self.oldest, self.sent = 0, 0.0, 0
        self.inflight: list[tuple[Future, int]] = []
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(self.max_inflight, thread_name_prefix="sqs-sink")
        self.stopping = threading.Event()
        self.ticker = threading.Thread(target=self._tick, name="sqs-sink-ticker", daemon=True)
        if self.max_wait > 0:
            self.ticker.start()

    def add(self, entry: dict, source_id: str | None, size: int) -> None:
        with self.lock:
            if self.batch and (
                len(self.batch) >= self.max_entries or self.batch_bytes + size > self.batch_limit
            ):
                self._flush()
            if not self.batch:
                self.oldest = time.monotonic()
            self.batch.append((entry, source_id))
            self.batch_bytes += size
            if len(self.batch) >= self.max_entries or self.max_wait <= 0:
                self._flush()

    def _flush(self, drain: bool = False) -> None:
        """Submit the buffer (lock held); wait while over the in-flight or buffered caps, or for all."""
        if self.batch:
            self.inflight.append(
                (self.pool.submit(self.writer.send, self.batch, self.rejected), len(self.batch))
            )
            self.batch, self.batch_bytes = [], 0
        while self.inflight and (
            drain
            or len(self.inflight) >= self.max_inflight
            or sum(n for _, n in self.inflight) >= self.max_buffered
            or any(f.done() for f, _ in self.inflight)
        ):
            wait([f for f, _ in self.inflight], return_when=FIRST_COMPLETED)
            for item in [i for i in self.inflight if i[0].done()]:
                self.sent += item[0].result()  # a failed send raises here, and stays listed to raise again
                self.inflight.remove(item)

    def _tick(self) -> None:
        while not self.stopping.wait(min(0.2, max(0.01, self.max_wait / 4))):
            with self.lock:
                if self.batch and time.monotonic() - self.oldest >= self.max_wait:
                    try:
                        self._flush()
                    except BaseException:
                        return  # the row loop's next flush, or finish(), raises it

    def finish(self) -> int:
        with self.lock:
            self._flush(drain=True)
        return self.sent

    def stop(self) -> None:
        self.stopping.set()
        if self.ticker.is_alive():
            self.ticker.join()
        self.pool.shutdown(wait=True, cancel_futures=True)
