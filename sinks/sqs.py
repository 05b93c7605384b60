"""AWS SQS sink: SendMessageBatch from the executors with bounded in-flight calls and partial retries."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ingest.config.sinks import SqsSinkConfig
from ingest.errors import FatalError, TransientError, call_with_retries, redact
from sinks.base import META
from sinks.frame import send_frame, write_partitions
from sources.sqs_client import ClientFactory, classify

log = logging.getLogger(__name__)
DEFAULT_MAX_MESSAGE = 1024 * 1024


def dedup_id(source_id: str) -> str:
    """A MessageDeduplicationId derived from the source message id (≤128 chars)."""
    return hashlib.sha256(source_id.encode()).hexdigest()


class SqsSink:
    """Writes rows to an SQS queue (Flink SQS sink options and defaults).

    Guarantee: at-least-once; on a FIFO target exactly-once within SQS's 5-minute dedup
    window, because ``MessageDeduplicationId`` is derived from the source message id, so a
    replayed batch is dropped by SQS itself. Each batch ends in one of three ways: complete;
    only the failed entries re-sent (throttling, 5xx; up to ``max_retries``); or fatal (the
    Spark batch fails and is replayed; nothing is lost). A record SQS refuses for good, or
    one over ``maxRecordSizeInBytes``, follows ``on_bad_record``.
    """

    def __init__(self, cfg: SqsSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.fifo = cfg.url.endswith(".fifo")
        self.rejected: list[dict] = []

    def write(self, df, batch_id: int) -> int:
        from pyspark.sql import functions as F

        extra = {}
        if self.fifo:
            group = F.col(self.cfg.group_column) if self.cfg.group_column else None
            if group is None and META in df.columns:
                group = F.col(f"{META}.group_id")
            extra["group_id"] = (
                F.coalesce(group.cast("string"), F.lit("default")) if group is not None else F.lit("default")
            )
            if self.cfg.dedup_id_column:
                extra["dedup_id"] = F.col(self.cfg.dedup_id_column).cast("string")
        for name in self.cfg.attribute_columns:
            extra[f"attr_{name}"] = F.col(name).cast("string")
        if self.fifo:
            extra["arrival"] = (
                F.col(f"{META}.arrival") if META in df.columns else F.monotonically_increasing_id()
            )
        frame = send_frame(df, self.cfg, extra)
        if self.fifo:
            # Each group in one partition, in arrival order, sent one call at a time: queue order kept.
            frame = frame.repartition("group_id").sortWithinPartitions("group_id", "arrival")
        writer = SqsPartitionWriter(self.cfg)
        written, self.rejected = write_partitions(frame, writer.write)
        return written

    def close(self) -> None:
        pass


class SqsPartitionWriter:
    """Sends one partition's rows; runs on an executor, creates its client there."""

    def __init__(self, cfg: SqsSinkConfig) -> None:
        self.cfg = cfg
        self.fifo = cfg.url.endswith(".fifo")
        self.clients = ClientFactory(cfg)

    def _limits(self) -> tuple[int, int]:
        if self.cfg.max_record_size_in_bytes and self.cfg.max_batch_size_in_bytes:
            return self.cfg.max_record_size_in_bytes, self.cfg.max_batch_size_in_bytes
        try:
            attrs = self.clients.client().get_queue_attributes(
                QueueUrl=self.cfg.url, AttributeNames=["MaximumMessageSize"]
            )["Attributes"]
            queue_max = int(attrs.get("MaximumMessageSize", DEFAULT_MAX_MESSAGE))
        except Exception as err:
            raise classify(err, self.cfg.url, "GetQueueAttributes") from err
        return (self.cfg.max_record_size_in_bytes or queue_max, self.cfg.max_batch_size_in_bytes or queue_max)

    def _entry(self, row: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"MessageBody": row["body"] if row["body"] is not None else ""}
        attrs = {
            k[5:]: {"DataType": "String", "StringValue": v}
            for k, v in row.items()
            if k.startswith("attr_") and v is not None
        }
        if attrs:
            entry["MessageAttributes"] = attrs
        if self.fifo:
            entry["MessageGroupId"] = row["group_id"]
            dedup = row.get("dedup_id")
            entry["MessageDeduplicationId"] = dedup or dedup_id(row["source_id"] or entry["MessageBody"])
        elif self.cfg.delay_seconds:
            entry["DelaySeconds"] = self.cfg.delay_seconds
        return entry

    @staticmethod
    def _size(entry: dict[str, Any]) -> int:
        n = len(entry["MessageBody"].encode())
        for k, v in entry.get("MessageAttributes", {}).items():
            n += len(k.encode()) + len(v["DataType"]) + len(v["StringValue"].encode())
        return n

    def write(self, rows: Iterable[Any]) -> tuple[int, list[dict]]:
        record_limit, batch_limit = self._limits()
        rejected: list[dict] = []
        inflight: deque[Future] = deque()
        sent = 0
        batch: list[tuple[dict, str | None]] = []
        size, started = 0, time.monotonic()
        max_inflight = 1 if self.fifo else self.cfg.max_in_flight_requests
        with ThreadPoolExecutor(max_inflight, thread_name_prefix="sqs-sink") as pool:

            def submit() -> None:
                nonlocal batch, size, sent
                if batch:
                    inflight.append(pool.submit(self._send, batch, rejected))
                    batch, size = [], 0
                while len(inflight) >= max_inflight:
                    sent += inflight.popleft().result()

            for raw in rows:
                row = raw.asDict() if hasattr(raw, "asDict") else dict(raw)
                entry = self._entry(row)
                n = self._size(entry)
                if n > record_limit:
                    self._bad(
                        entry,
                        row["source_id"],
                        f"{n} bytes, over maxRecordSizeInBytes {record_limit}",
                        rejected,
                    )
                    continue
                full = len(batch) >= self.cfg.max_batch_size or size + n > batch_limit
                stale = (time.monotonic() - started) * 1000 >= self.cfg.max_time_in_buffer_ms
                if batch and (full or stale):
                    submit()
                if not batch:
                    started = time.monotonic()
                batch.append((entry, row["source_id"]))
                size += n
            submit()
            while inflight:
                sent += inflight.popleft().result()
        return sent, rejected

    def _send(self, batch: list[tuple[dict, str | None]], rejected: list[dict]) -> int:
        pending = {str(i): item for i, item in enumerate(batch)}
        client = self.clients.client()
        accepted = 0

        def attempt() -> None:
            nonlocal accepted
            entries = [{"Id": i, **entry} for i, (entry, _) in pending.items()]
            try:
                resp = client.send_message_batch(QueueUrl=self.cfg.url, Entries=entries)
            except Exception as err:
                raise classify(err, self.cfg.url, "SendMessageBatch") from err
            for ok in resp.get("Successful", []):
                pending.pop(ok["Id"])
                accepted += 1
            retryable = 0
            for bad in resp.get("Failed", []):
                reason = f"{bad.get('Code')}: {bad.get('Message', '')}"
                if bad.get("SenderFault"):
                    entry, source_id = pending.pop(bad["Id"])
                    self._bad(entry, source_id, reason, rejected)
                else:
                    retryable += 1
            if retryable:
                raise TransientError(f"SendMessageBatch to {self.cfg.url}: {retryable} entries failed")

        attempts = 1 if self.cfg.fail_on_error else self.cfg.max_retries + 1
        call_with_retries(attempt, attempts=attempts)
        return accepted

    def _bad(self, entry: dict, source_id: str | None, reason: str, rejected: list[dict]) -> None:
        what = f"record from source message {source_id} refused by {self.cfg.url}: {reason}"
        policy = self.cfg.on_bad_record
        if policy == "fail" or self.cfg.fail_on_error:
            raise FatalError(redact(what) + f"; sinks.{self.cfg.name}.on_bad_record is {policy}")
        log.warning("%s (%s)", redact(what), "skipped" if policy == "skip" else "dead-lettered")
        rejected.append(
            {
                "sink": self.cfg.name,
                "source_id": source_id,
                "error": reason,
                "body": entry["MessageBody"],
                "action": policy,
            }
        )
