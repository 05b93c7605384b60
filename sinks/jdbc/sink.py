"""JDBC table sink: executors write a staging table, the driver moves it into the table in one transaction."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ingest.connector import META, WriteReport
from ingest.errors import FatalError
from ingest.faults import crash_point
from sinks.files.sink import without_staging_fields
from sinks.jdbc.columns import matched
from sinks.jdbc.config import JdbcSinkConfig
from sinks.jdbc.table import JdbcTarget, connection_properties

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
_ORDER = ("__mq_received_at", "__mq_arrival", "__mq_pos")
"""Receive order of a merge batch's rows, to keep the latest row per key."""


class JdbcSink:
    """Writes each micro-batch into a relational table exactly once, through JDBC.

    Guarantee: exactly once per micro-batch. The executors write the batch's rows with Spark's
    JDBC writer into a staging table named for the sink and the batch (each task commits its
    own rows there; a failed write is redone over it). The driver then runs one transaction:
    if the marker table holds the sink's batch (its last committed batch id is at or past it),
    nothing is written; otherwise the rows move into the table (an ``INSERT … SELECT``, or for
    ``merge`` the batch's latest row per key as the database's dialect says: PostgreSQL's a
    ``DELETE`` of the keys the batch has then the ``INSERT``, MariaDB's an ``INSERT … ON DUPLICATE
    KEY UPDATE``), the marker is moved to the batch, and it commits; then the staging table is dropped.
    A replayed batch therefore adds no row; a batch before the marker's is no replay (a reset
    checkpoint, or another job under the same ``app_id``) and fails. Staging tables a failed or
    killed run left are dropped at the sink's first batch. Transient errors (a connection refused
    or lost, a timeout, a serialization failure) are retried ``max_retries`` times; the rest fail
    the batch (fatal), naming ``sinks.<name>.url``, the table and the column.
    """

    plan_write = True
    """``write`` runs the frame's plan once, to the end, as one Spark SQL action (a replayed
    batch's too, into Spark's ``noop`` writer, so the job's observed counts stay complete)."""

    def __init__(self, cfg: JdbcSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.target = JdbcTarget(cfg)
        self._columns: tuple[list[tuple[str, str]], dict[str, str]] | None = None
        self._schema: StructType | None = None

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        t = self.target
        out = self._frame(df)
        schema = out.drop(*_ORDER).schema
        if self._columns is None or schema != self._schema:
            self._columns = t.retrying(
                f"read table {self.cfg.table}", lambda: self._prepare(schema, batch_id)
            )
            self._schema = schema
        last = t.retrying("read the marker", t.committed)
        if last > batch_id:  # Spark replays its last batch only: this one is no replay
            raise FatalError(
                f"sinks.{self.name}.marker_table: {self.cfg.marker_table} holds batch {last} for "
                f"{t.sink_id}, past this batch {batch_id}: the job's checkpoint was reset, or another "
                f"job writes as {t.sink_id}; delete its row there to start again"
            )
        if last == batch_id:
            log.info("jdbc sink %s: the table holds batch %d already; not written", self.name, batch_id)
            out.write.format("noop").mode("overwrite").save()
            return WriteReport(0)
        staging = t.staging(batch_id)
        rows = t.retrying(f"write staging table {staging}", lambda: self._stage(out, staging))
        crash_point("before_jdbc_commit")
        columns, casts = self._columns
        what = f"commit batch {batch_id} into table {self.cfg.table}"
        try:
            if not t.retrying(what, lambda: t.commit(batch_id, staging, columns, casts)):
                log.warning(
                    "jdbc sink %s: batch %d was committed already (a lost answer)", self.name, batch_id
                )
        finally:
            try:
                t.retrying(f"drop {staging}", lambda: t.drop(staging))
            except Exception as err:  # the next run's first batch drops it
                log.warning("jdbc sink %s: staging table %s left: %s", self.name, staging, err)
        return WriteReport(rows)

    def check_target(self, schema: StructType) -> None:
        """Compare the table with the columns the sink receives, if the database is reachable (for
        ``check``): a missing table without ``create_table``, a missing column or a type that cannot
        take the values is a ``FatalError``; an unreachable database only a warning."""
        from ingest.errors import TransientError

        t = self.target
        try:
            have = t.columns()
        except Exception as err:
            from sinks.jdbc.errors import database_error

            found = database_error(t.key, f"read table {self.cfg.table}", err, t.dialect.transient_codes)
            if isinstance(found, TransientError):
                log.warning("%s (not compared)", found)
                return
            raise found from None
        finally:
            t.close()
        if have is None:
            if not self.cfg.create_table:
                raise FatalError(f"{t.key}: table {self.cfg.table} does not exist (set create_table: true)")
            return
        matched(t.key, self.cfg.table, self._frame_schema(schema), have, t.dialect.cast_types)

    def close(self) -> None:
        self.target.close()

    def _prepare(self, schema: StructType, batch_id: int) -> tuple[list[tuple[str, str]], dict[str, str]]:
        """The table's columns for the batch's (created from them with ``create_table``, with a
        unique key on ``merge_keys`` where the dialect's merge needs one); staging tables of the
        sink's other batches dropped."""
        t = self.target
        have = t.columns()
        created = have is None
        if have is None:
            if not self.cfg.create_table:
                raise FatalError(f"{t.key}: table {self.cfg.table} does not exist (set create_table: true)")
            from pyspark.sql import SparkSession

            log.info("jdbc sink %s: creating table %s", self.name, self.cfg.table)
            empty_frame(SparkSession.active(), schema).write.format("jdbc").options(
                **self._options(t.table)
            ).mode("append").save()
            have = t.columns()
            assert have is not None
        if self.cfg.mode == "merge" and t.dialect.merge_needs_unique_key:
            self._unique_key(created)
        for stale in t.stale_staging(keep=batch_id):
            log.info("jdbc sink %s: dropping staging table %s of a failed batch", self.name, stale)
            t.drop(stale)
        return matched(t.key, self.cfg.table, schema, have, t.dialect.cast_types)

    def _unique_key(self, created: bool) -> None:
        """Make sure the table has a primary or unique key on exactly ``merge_keys`` (an upsert
        matches rows by it): given to a table the sink just created, else a ``FatalError``."""
        t, keys = self.target, self.cfg.merge_keys
        if {k.lower() for k in keys} in t.unique_keys():
            return
        if not created:
            raise FatalError(
                f"sinks.{self.name}.merge_keys: table {self.cfg.table} has no primary or unique key on "
                f"exactly {keys}: merge on {t.dialect.name} is an upsert (INSERT … ON DUPLICATE KEY "
                "UPDATE), which matches rows by one"
            )
        log.info("jdbc sink %s: adding a unique key on %s to table %s", self.name, keys, self.cfg.table)
        t.execute(t.dialect.unique_key_ddl(t.table, keys))

    def _stage(self, out: DataFrame, staging: str) -> int:
        """Write the batch into ``staging`` (replacing one a failed try left); the rows written."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        frame = out
        if self.cfg.mode == "merge":
            frame = _latest(out, self.cfg.merge_keys)
        rows = Observation()
        observed = frame.observe(rows, F.count(F.lit(1)).alias("rows"))
        observed.write.format("jdbc").options(**self._options(staging)).mode("overwrite").save()
        return int(rows.get["rows"])

    def _options(self, table: str) -> dict[str, str]:
        """Spark's JDBC writer options for ``table`` (its name as SQL: Spark pastes ``dbtable`` in)."""
        url = self.target.dialect.spark_url(self.cfg.url)
        options = {**connection_properties(self.cfg), "url": url, "dbtable": table}
        options |= {"driver": self.cfg.driver_class(), "batchsize": str(self.cfg.batch_size)}
        if self.cfg.num_partitions is not None:
            options["numPartitions"] = str(self.cfg.num_partitions)
        return options

    def _frame(self, df: DataFrame) -> DataFrame:
        """The rows as the table takes them: ``_meta`` as JSON text (without staging fields) or
        dropped, other nested columns as JSON text; for ``merge``, the receive-order columns too."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType, MapType, StructType

        out = df
        if META in df.columns:
            kind = df.schema[META].dataType
            have = tuple(kind.fieldNames()) if isinstance(kind, StructType) else ()
            if self.cfg.mode == "merge" and all(f in have for f in ("received_at", "arrival")):
                out = out.withColumns(
                    {_ORDER[0]: F.col(f"{META}.received_at"), _ORDER[1]: F.col(f"{META}.arrival")}
                )
            out = (
                out.withColumn(META, without_staging_fields(have))
                if self.cfg.include_meta
                else out.drop(META)
            )
        if self.cfg.mode == "merge":
            out = out.withColumn(_ORDER[2], F.monotonically_increasing_id())
        nested = [
            f.name for f in out.schema.fields if isinstance(f.dataType, (StructType, ArrayType, MapType))
        ]
        return out.withColumns({name: F.to_json(F.col(name)) for name in nested}) if nested else out

    def _frame_schema(self, schema: StructType) -> StructType:
        from pyspark.sql import SparkSession

        return self._frame(empty_frame(SparkSession.active(), schema)).drop(*_ORDER).schema


def _latest(df: DataFrame, keys: list[str]) -> DataFrame:
    """One row per key: the last received (``_meta.received_at``, ``arrival``), else the batch's last."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.col(c).desc_nulls_last() for c in _ORDER if c in df.columns]
    ranked = df.withColumn("__mq_rank", F.row_number().over(Window.partitionBy(*keys).orderBy(*order)))
    return ranked.where("__mq_rank = 1").drop("__mq_rank", *_ORDER)


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """A DataFrame of no rows with ``schema`` as given (its nullability too), to create a table from.

    Made over an RDD of no partitions, so an action on it runs no task and so no Python worker
    (``createDataFrame([], schema)`` runs one a partition; ``limit(0)`` of a batch's own frame
    would complete the observations on that frame with no rows).
    """
    return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
