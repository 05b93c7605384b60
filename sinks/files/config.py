"""The files sink's typed config: the output directory, the format, the ``_meta`` column."""

from __future__ import annotations

from typing import ClassVar, Literal

from ingest.config.connector import FlinkSql, FlinkTable, SinkDelivery
from ingest.config.sink_base import SinkBase


def _path(t: FlinkTable) -> None:
    """Flink's filesystem connector needs ``path``, a directory or a ``file://`` URL."""
    path = t.pop("path")
    if path is None:
        raise t.refuse("the filesystem connector needs 'path'")
    t.out["path"] = path[0].removeprefix("file://")


class FilesSinkConfig(SinkBase):
    """JSON-lines or Parquet files, one directory per batch: a replayed batch overwrites its own."""

    implementation: ClassVar[str] = "sinks.files.sink:FilesSink"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql(
        "filesystem",
        formats={"json": "jsonl", "parquet": "parquet"},
        formats_refused="the filesystem sink writes json or parquet",
        defaults={"include_meta": False},
        read=_path,
    )
    """``'connector' = 'filesystem'``: ``path`` required (``file://`` or a directory); the table's
    columns are the declared ones, so ``_meta`` is left out unless ``include_meta`` says otherwise."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "idempotent_per_batch", note="A replayed batch overwrites its own `batch_id=N` directory."
    )

    type: Literal["files"]
    path: str
    """The output directory: one ``batch_id=N`` directory per micro-batch."""
    format: Literal["jsonl", "parquet"] = "jsonl"
    """The files' format: JSON lines or Parquet."""
    include_meta: bool = True
    """Keep the ``_meta`` struct (message id, queue, timestamps, attributes...) in the output, without
    the staging fields (receipt handle, raw body, staged file)."""
