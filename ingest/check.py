"""Validates a whole job against a Spark session: formats, the schema DDL and the transform.

``python -m ingest.run --config job.yaml --check`` runs it on a local session and touches no
queue, sink or state; the job runs it again as soon as its own session is up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.config import JobConfig
from ingest.decode import ERROR, apply_transform, check_supported, decode_sources
from ingest.envelope import FILE_COLUMN, spark_schema
from ingest.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def check_job(cfg: JobConfig, spark: SparkSession) -> dict[str, list[str]]:
    """Raise ``ConfigError`` naming the key if the job cannot run; return each sink's columns.

    Decodes an empty batch of every source with its options and runs the transforms over it
    (the job's, then each sink's), so a bad DDL, an unknown column or a SQL error is found
    before any message is read.
    """
    from pyspark.sql import functions as F

    for source in cfg.sources:
        check_supported(source.name, source, cfg.body_schema, spark_ready=True)
    empty = spark.createDataFrame([], spark_schema()).withColumn(FILE_COLUMN, F.lit(None).cast("string"))
    good = decode_sources(empty, cfg.sources, cfg.body_schema).drop(ERROR, FILE_COLUMN)
    out = _transformed(good, cfg.transform, "transform")
    return {s.name: _transformed(out, s.transform, f"sinks.{s.name}.transform").columns for s in cfg.sinks}


def _transformed(df: DataFrame, transform: str | None, key: str) -> DataFrame:
    try:
        out = apply_transform(df, transform)
        out.schema  # noqa: B018 - analysis happens here
        return out
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"config key {key}: {first}") from None
