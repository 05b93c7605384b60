"""Spark writer sink: each batch through ``df.write`` with a format, options, a mode, partitions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.connector import META, WriteReport
from ingest.errors import FatalError, describe, redact
from ingest.storage import hadoop_url
from sinks.spark_writer.config import SparkWriterSinkConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class SparkWriterSink:
    """Writes each batch with Spark's batch writer, ``df.write.format(format)…save()``.

    Guarantee: at-least-once. A batch replayed after a crash between this write and the job's
    state commit is written again (the target's own keys, or a ``merge`` downstream, drop the
    copies); a write that fails part way may have left some rows (JDBC commits per partition).
    For exactly once into a table, use the delta sink, or a function sink that writes the batch
    and its idempotency key in one transaction.
    """

    plan_write = False
    """``write`` counts the rows, then writes them (JDBC writes from an RDD action)."""

    def __init__(self, cfg: SparkWriterSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        cfg = self.cfg
        out = df if cfg.include_meta or META not in df.columns else df.drop(META)
        rows = out.count()
        if not rows:
            return WriteReport(0)
        writer = out.write.format(cfg.format).mode(cfg.mode)
        writer = writer.options(**{k: _text(v) for k, v in cfg.options.items()})
        if cfg.partition_by:
            writer = writer.partitionBy(*cfg.partition_by)
        try:
            writer.save(hadoop_url(cfg.path)) if cfg.path else writer.save()
        except Exception as err:
            what = f"sink {self.name}: writing batch {batch_id} as {cfg.format} failed: {describe(err)}"
            raise FatalError(redact(what)) from err
        return WriteReport(rows)

    def close(self) -> None:
        pass


def _text(value: str | int | float | bool) -> str:
    """An option as Spark reads it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
