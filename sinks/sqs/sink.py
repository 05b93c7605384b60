"""AWS SQS sink (standard and FIFO): SendMessageBatch from the executors, bounded and partially retried."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ingest.connector import (
    BINARY_PREFIX,
    META,
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
from ingest.connector.claim_check import SIZE_ATTRIBUTE, SIZE_ATTRIBUTES, Offloader, Payload
from ingest.errors import call_with_retries, error_code
from sinks.sqs.config import SqsSinkConfig
from sources.sqs.client import ClientFactory, resolve_region
from sources.sqs.errors import classify, entry_is_final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_FORBIDDEN = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters SQS refuses in a body; it allows #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF."""

log = logging.getLogger(__name__)
FALLBACK_MAX_MESSAGE = 256 * 1024
"""Used when the queue's MaximumMessageSize cannot be read (no sqs:GetQueueAttributes)."""
MAX_ATTRIBUTES = 10
"""SQS takes at most this many message attributes per message."""
RECORD_ERRORS = frozenset({"InvalidParameterValue", "InvalidMessageContents", "BatchRequestTooLong"})
"""Whole-batch refusals that one bad entry can cause: the batch is then sent entry by entry."""
PAYLOAD = "_payload"
"""Entry key (never sent) of an offloaded record's ``Payload``, put before the entry is sent."""
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

    Claim-check (``claim_check``): a record over ``claim_check.threshold`` (default: the
    queue's maximum message size, body and attributes as SQS counts them) is put to the bucket
    under ``key_prefix`` + ``<source message id>/<sha256 of the body>`` and sent as the SQS
    Extended Client's pointer with its ``ExtendedPayloadSize`` attribute, so Extended Client
    consumers read it unchanged. A replay puts the same keys (no orphans); FIFO dedup ids stay
    those of the original bodies. A payload that cannot be put fails the batch.
    """

    plan_write = False
    """``write`` sends rows from the executors (an RDD action), not one Spark SQL action."""

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
    ``dedup_id``, ``delay``, ``queue_url``, ``forward`` and ``attr_<name>``. This class is
    the SQS side of ``ingest.connector.SendBuffer`` (one per target queue), which batches up to
    ``maxBatchSize`` entries and ``maxBatchSizeInBytes``, flushes after ``maxTimeInBufferMS``,
    runs at most ``maxInFlightRequests`` calls (1 for FIFO, to keep group order) with at most
    ``maxBufferedRequests`` records buffered or in flight, and re-sends only failed retryable
    entries up to ``max_retries`` times with the ``backoff.*`` settings (``failOnError`` true:
    none), then raises (``failOnError`` false: until SQS takes them). Entries failed for good
    (``entry_is_final``), a character SQS forbids and records over ``maxRecordSizeInBytes``
    follow ``on_bad_record``.
    """

    def __init__(self, cfg: SqsSinkConfig) -> None:
        self.cfg = cfg
        self.fifo = cfg.url.endswith(".fifo")
        self.clients = ClientFactory(cfg, shared=True)
        self.target_name = cfg.url
        self.call_name = f"SendMessageBatch to {cfg.url}"
        self.offload = Offloader(cfg.claim_check, cfg) if cfg.claim_check else None
        self.max_attributes = MAX_ATTRIBUTES - 1 if self.offload else MAX_ATTRIBUTES
        self._record_limit: int | None = None

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
                cfg = self.cfg
                _queue_max[cfg.url] = call_with_retries(
                    get,
                    what=f"sink {cfg.name}: GetQueueAttributes of {cfg.url}",
                    attempts=None if cfg.fail_on_error is False else cfg.max_retries + 1,
                    initial_wait=cfg.backoff_initial_interval,
                    max_wait=cfg.backoff_max_interval,
                )
            return _queue_max[self.cfg.url]

    def entry(self, row: dict[str, Any]) -> dict[str, Any] | str:
        """The SendMessageBatch entry (without ``Id``) for one frame row, or why SQS would refuse it."""
        body = row["body"] if row.get("body") is not None else ""
        bad_char = _FORBIDDEN.search(body)
        if bad_char:
            code, at = ord(bad_char.group()), bad_char.start()
            return f"body has character U+{code:04X} at {at}, which SQS does not allow"
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
        if self.offload:
            if self._record_limit is None:
                self._record_limit = self.limits()[0]
            if self.offload.wanted(self.size(entry), self._record_limit):
                payload = self.offload.payload(body, row.get("source_id"))
                entry["MessageBody"], entry[PAYLOAD] = payload.pointer, payload
                size = {"DataType": "Number", "StringValue": str(payload.size)}
                entry["MessageAttributes"] = entry.get("MessageAttributes", {}) | {SIZE_ATTRIBUTE: size}
        return entry

    def _forwarded(self, row: dict[str, Any], taken: int) -> dict[str, dict[str, Any]]:
        """The source message's attributes, typed as received, in name order, within SQS's 10
        (9 with claim-check, which reserves one; a source's own pointer-size attribute is not forwarded)."""
        values, types = row.get("forward") or {}, row.get("forward_types") or {}
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(values):
            if taken + len(out) >= self.max_attributes:
                break
            value = values[name]
            if value is None or name.startswith(tuple(self.cfg.forward_exclude_prefixes)):
                continue
            if self.offload and name in SIZE_ATTRIBUTES:
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

    def write(self, rows: Iterable[Any]) -> tuple[int, list[RefusedRecord]]:
        """Send every row, each to its ``queue_url`` or ``sqsUrl``; return (accepted, rejected records)."""
        return write_rows(rows, self._lane, lambda row: row.get("queue_url") or self.cfg.url)

    def _lane(self, url: str) -> SendBuffer[dict[str, Any]]:
        """The batcher for one target queue, with that queue's size limits (1 call at a time on FIFO)."""
        writer = self if url == self.cfg.url else SqsPartitionWriter(self.cfg.model_copy(update={"url": url}))
        cfg, (record_limit, batch_limit) = self.cfg, writer.limits()
        limits = Limits(
            max_entries=cfg.max_batch_size,
            max_batch_bytes=batch_limit,
            max_record_bytes=record_limit,
            max_in_flight=1 if writer.fifo else cfg.max_in_flight_requests,
            max_buffered=cfg.max_buffered_requests,
            max_wait=cfg.max_time_in_buffer_ms / 1000,
        )
        retry = RetryPolicy(
            attempts=cfg.max_retries + 1,
            initial_wait=cfg.backoff_initial_interval,
            max_wait=cfg.backoff_max_interval,
            max_elapsed=cfg.backoff_max_elapsed_time,
            fail_on_error=cfg.fail_on_error,
        )
        return SendBuffer(writer, limits, retry, name="sqs-sink")

    def send(self, entries: list[dict[str, Any]]) -> list[Failed | None]:
        """One SendMessageBatch call, after putting the offloaded payloads; per entry ``None`` (accepted)
        or ``Failed`` (final or retryable). A payload put fails the call (raises)."""
        payloads: list[Payload] = [e[PAYLOAD] for e in entries if PAYLOAD in e]
        if self.offload and payloads:
            self.offload.store(payloads)
        batch = [{"Id": str(i)} | {k: v for k, v in e.items() if k != PAYLOAD} for i, e in enumerate(entries)]
        if self.cfg.client == "crt":
            payload = {"QueueUrl": self.cfg.url, "Entries": [_json_entry(e) for e in batch]}
            resp = self.clients.crt().call("SendMessageBatch", payload)
        else:
            resp = self.clients.client().send_message_batch(QueueUrl=self.cfg.url, Entries=batch)
        results: list[Failed | None] = [Failed()] * len(entries)  # no answer: re-sent
        for ok in resp.get("Successful", []):
            results[int(ok["Id"])] = None
        for bad in resp.get("Failed", []):
            reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
            results[int(bad["Id"])] = Failed(reason, final=entry_is_final(bad))
        return results

    def classify(self, err: Exception) -> BaseException:
        """A whole-call refusal one bad entry can cause is ``CallRefused``; else ``classify``'s class."""
        code, message, _ = error_code(err)
        if code.rsplit(".", 1)[-1] in RECORD_ERRORS:
            return CallRefused(f"{code}: {message}")
        return classify(err, self.cfg.url, "SendMessageBatch")


def _json_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A SendMessageBatch entry as the JSON protocol carries it: Binary attribute values base64 text."""
    attrs = entry.get("MessageAttributes")
    if not attrs or not any("BinaryValue" in v for v in attrs.values()):
        return entry
    wire = {
        name: {**v, "BinaryValue": base64.b64encode(v["BinaryValue"]).decode("ascii")}
        if "BinaryValue" in v
        else v
        for name, v in attrs.items()
    }
    return {**entry, "MessageAttributes": wire}
