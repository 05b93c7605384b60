"""Delta Lake table sink: executors write Parquet files, the driver commits them with the batch id."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ingest.connector import META, WriteReport, executor_errors
from ingest.errors import ConfigError, redact
from ingest.faults import crash_point
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.files import ADDED, FileWriter, is_local, local_path
from sinks.delta.table import DeltaTarget
from sinks.files.sink import without_staging_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
_ORDER = ("__mq_received_at", "__mq_arrival")
"""Receive order of a merge batch's rows (from ``_meta``), to keep the latest row per key."""


class DeltaSink:
    """Writes each micro-batch to a Delta table in one commit that carries ``(app_id, batch_id)``.

    Guarantee: exactly once per micro-batch. Before writing, the sink reads the table's app
    transaction version for its ``app_id``; a batch at or below it (a replay after a crash
    between the table commit and the state commit) writes nothing. ``append``: each Spark task
    writes its rows as Parquet files (pyarrow) under the table and returns their add actions;
    the driver commits them all in one transaction, so a batch is wholly visible or not at all.
    Files of a batch that failed before its commit are referenced by no version: readers never
    see them, the failing run deletes what it can and the maintenance vacuum removes the rest.
    ``merge``: the batch's latest row per ``merge_keys`` is upserted by delta-rs on the driver,
    in one transaction with the same app transaction. Every ``maintenance_every`` batches the
    table is compacted and vacuumed. A commit that loses to a concurrent writer is retried
    ``commit_retries`` times, then the batch fails (``FatalError``) and is replayed on restart.
    """

    plan_write = True
    """``write`` runs the frame's plan once, to the end, as one Spark SQL action (a replayed
    batch's too, into Spark's ``noop`` writer, so the job's observed counts stay complete)."""

    def __init__(self, cfg: DeltaSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.target = DeltaTarget(cfg)
        self._metas: dict[tuple[str, ...], Any] = {}
        if is_local(cfg.path):
            _check_local(cfg)

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        out = self._frame(df)
        rows = Observation()
        observed = out.observe(rows, F.count(F.lit(1)).alias("rows"))
        if self.target.committed() >= batch_id:
            log.info("delta sink %s: the table holds batch %d already; not written", self.name, batch_id)
            observed.write.format("noop").mode("overwrite").save()
            return WriteReport(0)
        schema = _arrow_schema(out.drop(*_ORDER))
        self.target.evolve(schema)
        if self.cfg.mode == "merge":
            data = _latest(observed.toArrow(), list(self.cfg.merge_keys))
            crash_point("before_delta_commit")
            self.target.merge(data, batch_id)
        else:
            writer = FileWriter(
                self.target.uri,
                dict(self.target.options),
                tuple(self.target.table().metadata().partition_columns),
                self.cfg.target_file_size,
                batch_id,
                key=f"{self.target.key}.path",
            )
            with executor_errors():
                actions = [r.asDict() for r in observed.mapInArrow(writer, ADDED).collect()]
            crash_point("before_delta_commit")
            try:
                self.target.commit(actions, batch_id)
            except BaseException:
                self.target.discard([a["path"] for a in actions])
                raise
        written = int(rows.get["rows"])
        if batch_id % self.cfg.maintenance_every == 0 and batch_id > 0:
            self.target.maintain()
        return WriteReport(written)

    def maintain(self) -> dict[str, int]:
        """Compact and vacuum the table now (the sink does it every ``maintenance_every`` batches)."""
        return self.target.maintain()

    def close(self) -> None:
        pass

    def _frame(self, df: DataFrame) -> DataFrame:
        """The rows as the table takes them: ``_meta`` without staging fields, or dropped; for
        ``merge``, the receive-order columns too."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        if META not in df.columns:
            return df
        kind = df.schema[META].dataType
        have = tuple(kind.fieldNames()) if isinstance(kind, StructType) else ()
        out = df
        if self.cfg.mode == "merge" and all(f in have for f in ("received_at", "arrival")):
            out = out.withColumns(
                {_ORDER[0]: F.col(f"{META}.received_at"), _ORDER[1]: F.col(f"{META}.arrival")}
            )
        if not self.cfg.include_meta:
            return out.drop(META)
        if have not in self._metas:
            self._metas[have] = without_staging_fields(have)
        return out.withColumn(META, self._metas[have])


def _arrow_schema(df: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema, timezone="UTC")


def _latest(data: pa.Table, keys: list[str]) -> pa.Table:
    """One row per key: the last received (``_meta.received_at``, ``arrival``), else the batch's last."""
    data = data.append_column("__mq_pos", pa.array(range(data.num_rows), pa.int64()))
    order = [(c, "descending") for c in (*_ORDER, "__mq_pos") if c in data.column_names]
    data = data.sort_by(order).drop_columns(["__mq_pos"])
    data = data.append_column("__mq_pos", pa.array(range(data.num_rows), pa.int64()))
    first = data.group_by(keys, use_threads=False).aggregate([("__mq_pos", "min")])
    picked = data.take(first["__mq_pos_min"])
    return picked.drop_columns([c for c in (*_ORDER, "__mq_pos") if c in picked.column_names])


def _check_local(cfg: DeltaSinkConfig) -> None:
    """A local ``path`` must be a Delta table, missing, or an empty directory (no I/O for object stores)."""
    path = local_path(cfg.path)
    key = f"config key sinks.{cfg.name}.path"
    if os.path.isfile(path):
        raise ConfigError(f"{key}: {redact(cfg.path)} is a file, not a Delta table directory")
    if os.path.isdir(path) and not os.path.isdir(os.path.join(path, "_delta_log")) and os.listdir(path):
        raise ConfigError(
            f"{key}: {redact(cfg.path)} is a directory with files in it and no _delta_log: not a Delta table "
            "(give a new or empty directory, or an existing table)"
        )
