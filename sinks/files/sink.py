"""File sink: JSON lines or Parquet, one directory per batch, so a replayed batch replaces its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingest.connector import META, STAGING_FIELDS, WriteReport
from ingest.errors import FatalError, IngestError, describe, redact
from ingest.storage import hadoop_url
from sinks.files.config import FilesSinkConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class FilesSink:
    """Writes each micro-batch to ``<path>/batch_id=<N>/`` with Spark's committer.

    Guarantee: exactly once per batch. A batch replayed after a crash overwrites its own
    directory, so the output never holds a row twice; a directory without ``_SUCCESS`` is
    a batch still being written. ``spark.read.json(path)`` (or parquet) reads the whole
    output with ``batch_id`` as a partition column.
    """

    plan_write = True
    """``write`` runs the frame's plan once, to the end, as one Spark SQL action."""

    def __init__(self, cfg: FilesSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self._count: Any = None
        self._metas: dict[tuple[str, ...], Any] = {}
        """Columns built once, not per batch (each costs several Py4J calls): the row count, and
        ``_meta`` without its staging fields for each ``_meta`` shape seen."""

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        out = df
        if META in df.columns:
            if self.cfg.include_meta:
                kind = df.schema[META].dataType
                have = tuple(kind.fieldNames()) if isinstance(kind, StructType) else ()
                if have not in self._metas:
                    self._metas[have] = without_staging_fields(have)
                out = df.withColumn(META, self._metas[have])
            else:
                out = df.drop(META)
        if self._count is None:
            self._count = F.count(F.lit(1)).alias("rows")
        rows = Observation()
        fmt = "json" if self.cfg.format == "jsonl" else "parquet"
        out = out.observe(rows, self._count)
        target = f"{hadoop_url(self.cfg.path).rstrip('/')}/batch_id={batch_id}"
        try:
            out.write.mode("overwrite").format(fmt).save(target)
        except Exception as err:
            raise write_error(err, self.name, target) from err
        return WriteReport(int(rows.get["rows"]))

    def close(self) -> None:
        pass


def write_error(err: Exception, sink: str, target: str) -> Exception:
    """A write the JVM failed (a full disk, a read-only mount, a file where a folder should be) as a
    ``FatalError`` naming the sink's key and the directory, with the innermost Java cause (as
    ``java.io.IOException: No space left on device``); any other error as it is."""
    if isinstance(err, IngestError) or (
        getattr(err, "java_exception", None) is None and getattr(err, "_origin", None) is None
    ):
        return err
    return FatalError(redact(f"sinks.{sink}.path: cannot write {target}: {describe(err)}"))


def without_staging_fields(have: tuple[str, ...]):
    """The ``_meta`` column without the staging fields it has (a transform may have built its own);
    ``have``: its field names (none if it is not a struct)."""
    from pyspark.sql import functions as F

    drop = [name for name in STAGING_FIELDS if name in have]
    return F.col(META).dropFields(*drop) if drop and len(drop) < len(have) else F.col(META)
