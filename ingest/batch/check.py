"""Validates a whole job against a Spark session: formats, the schema DDL and the transform.

``python -m ingest.run --config job.yaml --check`` runs it on a local session and writes to no
queue, sink or state (a database sink reads its table's columns, if reachable); the job runs it
again as soon as its own session is up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ingest.batch.deadletter import DeadLetter
from ingest.batch.dedup import dedup_key
from ingest.batch.transforms import KEY, JobTransform, apply_transform
from ingest.config import JobConfig
from ingest.connector.envelope import FILE_COLUMN
from ingest.decode.rows import ERROR, check_supported, decode_sources
from ingest.errors import ConfigError, FatalError, first_line
from ingest.intake.envelope import spark_schema
from ingest.runtime import s3a
from ingest.runtime.spark import launched_by_spark_submit, missing_connector_jars

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def check_job(
    cfg: JobConfig, spark: SparkSession, sinks: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """Raise ``ConfigError`` naming the key if the job cannot run; return the columns each sink
    passes to its target (``SinkBase.written_columns``: no ``_meta`` where ``include_meta`` is off).

    Decodes an empty batch of every source with its options, evaluates the dedup key over
    it and runs the transforms (the job's Python and SQL ones, then each sink's; the
    dead-letter sink's over the bad messages it receives), so a bad DDL, an unknown column,
    a SQL error or a Python transform that fails on an empty batch is found before any
    message is read. ``sinks`` (built sinks by name, for ``check``): those whose config sets
    ``checks_target`` compare their target with the columns they receive. A sink's
    jar (a JDBC driver) the session did not start with is a warning naming both.
    """
    from pyspark.sql import functions as F

    for name, missing in missing_connector_jars(spark, cfg.sinks).items():
        log.warning(
            "sinks.%s: the Spark session started without %s (spark.jars / spark.jars.packages; a "
            "running session keeps its classpath): unless the driver is on it otherwise, the sink fails",
            name,
            ", ".join(missing),
        )

    started = dict(spark.sparkContext.getConf().getAll())
    jars = {k: ",".join(filter(None, (cfg.spark.conf.get(k), started.get(k)))) for k in s3a.JAR_KEYS}
    if warning := s3a.missing(cfg, jars, launched_by_spark_submit()):
        log.warning(warning)

    for source in cfg.sources:
        check_supported(source.name, source, cfg.body_schema, spark_ready=True)
    empty = spark.createDataFrame([], spark_schema()).withColumn(FILE_COLUMN, F.lit(None).cast("string"))
    _analysed("state.dedup_key", lambda: empty.select(dedup_key(cfg.state.dedup_key)))
    good = decode_sources(empty, cfg.sources, cfg.body_schema).drop(ERROR, FILE_COLUMN)
    transform = JobTransform(cfg)
    transform.register(spark)
    out = _transformed(_python(transform, good), cfg.transform, "transform")
    frames = {s.name: _transformed(out, s.transform, f"sinks.{s.name}.transform") for s in cfg.data_sinks}
    columns = {name: frame.columns for name, frame in frames.items()}
    for s in cfg.data_sinks:
        for option, names in s.column_options().items():
            if missing := [n for n in names if n not in columns[s.name]]:
                have = columns[s.name]
                raise ConfigError(
                    f"config key sinks.{s.name}.{option}: {missing} not among the sink's columns {have}"
                )
    checks = {s.name for s in cfg.data_sinks if s.checks_target}
    for name, sink in (sinks or {}).items():
        if name in frames and name in checks:
            sink.check_target(frames[name].schema)
    if (dlq := cfg.dead_letter_sink) is not None:
        bad = DeadLetter.frame(spark, [])
        columns[dlq.name] = _transformed(bad, dlq.transform, f"sinks.{dlq.name}.transform").columns
    by_name = {s.name: s for s in cfg.sinks}
    return {name: by_name[name].written_columns(cols) for name, cols in columns.items()}


def _python(transform: JobTransform, good: DataFrame) -> DataFrame:
    """The Python transform's output, analysed; an error as a ``ConfigError`` naming its key."""
    try:
        python = transform.python(good)
    except FatalError as err:  # it raised, or returned no DataFrame: the text names key and function
        raise ConfigError(f"config key {err}") from None
    return _analysed(KEY, lambda: python)


def _transformed(df: DataFrame, transform: str | None, key: str) -> DataFrame:
    """The transform's result, analysed; refused, naming ``key``, if it is not a query (it is
    parsed as one first, so a command such as ``DROP TABLE source`` is never run) or leaves no
    columns."""
    if transform:
        _query_only(df.sparkSession, transform, key)
    out = _analysed(key, lambda: apply_transform(df, transform))
    if not out.columns:
        raise ConfigError(f"config key {key}: the transform leaves no columns")
    return out


def _query_only(spark: SparkSession, transform: str, key: str) -> None:
    """Refuse a ``transform`` Spark's parser does not take as one query (``spark.sql`` would run a
    command such as ``DROP TABLE`` or ``SET`` at once, before any check of its result)."""
    from pyspark.errors import ParseException

    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        parser.parseQuery(transform.strip().rstrip(";").rstrip())
    except ParseException as err:
        why = first_line(str(err))
        raise ConfigError(f"config key {key}: not a query (SELECT … FROM source …): {why}") from None


def _analysed(key: str, build: Callable[[], DataFrame]) -> DataFrame:
    """``build()`` analysed; its error as a ``ConfigError`` naming ``key`` and Spark's first line."""
    try:
        out = build()
        out.schema  # noqa: B018 - analysis happens here
        return out
    except Exception as err:
        first = first_line(str(err)) or type(err).__name__
        raise ConfigError(f"config key {key}: {first}") from None
