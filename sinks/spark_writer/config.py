"""The Spark writer sink's typed config: the format, its options, the save mode, partitioning."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ingest.config.connector import FlinkSql, SinkDelivery
from ingest.config.sink_base import SinkBase
from ingest.errors import option_secrets, redact


class SparkWriterSinkConfig(SinkBase):
    """Any Spark batch writer (``df.write.format(…)``): at-least-once, a replayed batch is written
    again."""

    implementation: ClassVar[str] = "sinks.spark_writer.sink:SparkWriterSink"

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector of its own."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once",
        note="Spark's writers commit task by task: a batch that fails half way, or is replayed, "
        "may leave rows twice.",
    )

    type: Literal["spark_writer"]
    format: str = Field(min_length=1)
    """The data source Spark writes: ``jdbc``, ``parquet``, ``orc``, ``csv``, ``json``, ``text``,
    ``delta`` (with delta-spark in the session), or any other on the session's classpath."""
    path: str | None = None
    """Where file formats write (``save(path)``); a format that takes no path leaves it out."""
    options: dict[str, str | int | float | bool] = Field({}, repr=False)
    """The writer's options (``url``, ``dbtable``, ``user``, ``password``, ``compression``…):
    ``${env:NAME}`` is resolved, and values of keys naming a password, secret, token or credential
    are masked in logs and errors."""
    mode: Literal["append", "overwrite", "ignore", "error", "errorifexists"] = "append"
    """Spark's save mode. ``overwrite`` replaces the whole target with each batch."""
    partition_by: list[str] = []
    """Partition columns (``partitionBy``), for the formats that lay files out by them."""
    include_meta: bool = False
    """Write the ``_meta`` struct (message id, queue, timestamps) as a column too; off by default,
    as JDBC, CSV and text take no struct (select ``_meta.message_id`` in a ``transform`` instead)."""

    def column_options(self) -> dict[str, list[str]]:
        return {"partition_by": self.partition_by}

    @model_validator(mode="after")
    def _secrets(self) -> SparkWriterSinkConfig:
        redact.add(option_secrets(self.options))
        return self
