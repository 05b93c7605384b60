"""The dead-letter target: undecodable messages with their envelope and the error, per batch."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from ingest.batch.transforms import apply_transform
from ingest.config import JobConfig
from ingest.config.registry import build_sink
from ingest.connector import META, RefusedRecord, Sink
from ingest.decode.rows import ERROR
from ingest.runtime.frames import string_frame
from ingest.storage import store_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

log = logging.getLogger(__name__)


class DeadLetter:
    """Writes bad messages to a directory (one JSON-lines file per batch) and/or a sink.

    The directory is local or an ``s3a://`` prefix (``ingest.storage``): each file is written
    whole. Guarantee: exactly once per batch in the directory (a replayed batch overwrites its
    own ``batch_id=N.jsonl``); the sink's own guarantee otherwise. The raw body, the full
    envelope and the decode error are kept, so a message can be fixed and re-sent.
    """

    def __init__(self, path: str | None, sink: Sink | None, transform: str | None = None) -> None:
        self.path = store_for(path) if path else None
        self.sink = sink
        self.transform = transform
        """The dead-letter sink's own ``transform``, over ``body``, ``error`` and ``_meta``."""

    @classmethod
    def of(cls, cfg: JobConfig) -> DeadLetter | None:
        """The job's dead-letter target (its sink built as the job builds sinks), or None."""
        if cfg.dead_letter is None:
            return None
        sink_cfg = cfg.dead_letter_sink
        sink = build_sink(sink_cfg) if sink_cfg is not None else None
        return cls(cfg.dead_letter.path, sink, sink_cfg.transform if sink_cfg is not None else None)

    @staticmethod
    def frame(spark: SparkSession, records: list[tuple[str | None, str, str, str]]) -> DataFrame:
        """The rows a dead-letter sink receives: (body, error, message id, source) each."""
        from pyspark.sql import functions as F

        df = string_frame(spark, ["body", "error", "message_id", "source"], records)
        return df.select("body", "error", F.struct("message_id", "source").alias(META))

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()

    def write(self, spark: SparkSession, rows: list[Row], batch_id: int) -> None:
        records: list[dict[str, Any]] = []
        for row in rows:
            envelope = row[META].asDict(recursive=True)
            records.append({"batch_id": batch_id, "error": row[ERROR], **envelope})
        if self.path is not None:
            data = b"".join(orjson.dumps(r) + b"\n" for r in records)
            self.path.write(f"batch_id={batch_id}.jsonl", data)
        if self.sink is not None:
            bad = [(r["body"], r["error"], r["message_id"], r["source"]) for r in records]
            self.sink.write(apply_transform(self.frame(spark, bad), self.transform), batch_id)
        log.warning("batch %d: %d message(s) dead-lettered", batch_id, len(records))

    def write_records(self, records: list[RefusedRecord], batch_id: int, sink_name: str) -> None:
        """Records a sink refused (oversized, invalid): kept with the reason, one file per batch and sink."""
        if self.path is not None:
            data = b"".join(orjson.dumps({"batch_id": batch_id, **r}) + b"\n" for r in records)
            self.path.write(f"batch_id={batch_id}-{sink_name}.jsonl", data)
        else:
            log.error(
                "batch %d: %d record(s) refused by %s have no dead-letter path",
                batch_id,
                len(records),
                sink_name,
            )
        log.warning("batch %d: %d record(s) refused by %s dead-lettered", batch_id, len(records), sink_name)
