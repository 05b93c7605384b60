"""Fake-queue sink: sends each row as a message to a file-backed fake queue, from the executors."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ingest.connector import META, RefusedRecord, WriteReport, send_frame, write_partitions
from sinks.fake.config import FakeSinkConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class FakeSink:
    """Sends rows to a local fake queue in batches of ``batch_size``.

    Guarantee: at-least-once on a standard queue; on a FIFO queue the dedup id is derived
    from the source message id, so a replayed batch within the queue's 5-minute dedup
    window is not enqueued twice.
    """

    plan_write = False
    """``write`` sends rows from the executors (an RDD action), not one Spark SQL action."""

    def __init__(self, cfg: FakeSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        from pyspark.sql import functions as F

        extra = {}
        if self.cfg.fifo:
            if self.cfg.group_column:
                extra["group_id"] = F.col(self.cfg.group_column).cast("string")
            elif META in df.columns:
                extra["group_id"] = F.coalesce(F.col(f"{META}.group_id"), F.lit("default"))
            else:
                extra["group_id"] = F.lit("default")
        frame = send_frame(df, self.cfg, extra)
        cfg = self.cfg

        def send(rows: Iterable[Any]) -> tuple[int, list[RefusedRecord]]:
            from sources.fake.store import FakeQueue

            queue = FakeQueue(cfg.path, cfg.queue, fifo=cfg.fifo)
            sent = 0
            batch: list[dict] = []
            for row in rows:
                entry: dict[str, Any] = {"body": row["body"]}
                if cfg.fifo:
                    entry["group_id"] = row["group_id"]
                    if row["source_id"]:
                        entry["dedup_id"] = hashlib.sha256(row["source_id"].encode()).hexdigest()
                batch.append(entry)
                if len(batch) >= cfg.batch_size:
                    sent += len(queue.send_batch(batch))
                    batch = []
            if batch:
                sent += len(queue.send_batch(batch))
            return sent, []

        return write_partitions(frame, send)

    def close(self) -> None:
        pass
