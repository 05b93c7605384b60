"""The Delta Lake table sink's typed config: location, layout, write mode, maintenance."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ingest.config.connector import FlinkSql, FlinkTable, SinkDelivery
from ingest.config.sink_base import SinkBase
from ingest.config.types import Bytes, Seconds
from ingest.errors import redact

_SECRET_OPTION = re.compile(r"secret|token|password|sas|account_key|access_key$|private_key", re.IGNORECASE)
"""``storage_options`` keys whose values are credentials (masked in every log line and error)."""


def _table_path(t: FlinkTable) -> None:
    """Flink's Delta connector names the location 'table-path' ('path' is taken too)."""
    given = [t.pop(k) for k in ("table-path", "path")]
    paths = [g for g in given if g is not None]
    if len(paths) != 1:
        raise t.refuse("the delta connector needs 'table-path' (or 'path'), once")
    t.out["path"] = paths[0][0]
    if "table-name" in t.options:
        where = t.options["table-name"][1]
        raise t.refuse("option 'table-name' needs a catalog; give the location as 'table-path'", where)


class DeltaSinkConfig(SinkBase):
    """A Delta Lake table (delta-rs, no Spark jars): one commit per micro-batch.

    Each commit carries the app transaction (``app_id``, ``batch_id``): a replayed batch whose
    version the table already holds writes nothing, so the table holds each row once. Append
    files are written by the executors and committed by the driver in one transaction; ``merge``
    upserts on ``merge_keys`` (the batch's latest row per key wins) from the driver.
    """

    implementation: ClassVar[str] = "sinks.delta.sink:DeltaSink"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql(
        "delta", defaults={"include_meta": False}, read=_table_path
    )
    """``'connector' = 'delta'``: ``table-path`` (or ``path``) is the location; the table's columns
    are the declared ones, so ``_meta`` is left out unless ``include_meta`` says otherwise."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "idempotent_per_batch",
        skips_replayed_batch=True,
        note="Each commit carries the app transaction (`app_id`, batch id): a replayed batch the "
        "table holds is not written again.",
    )
    shares_path: ClassVar[bool] = True
    """Two Delta sinks may share ``path``: the table takes each one's commits under its own app id."""

    type: Literal["delta"]
    path: str = Field(min_length=1)
    """The table's location: a local directory, ``file://``, ``s3://``, ``abfss://``, ``gs://``…"""
    storage_options: dict[str, str] = Field({}, repr=False)
    """delta-rs object-store options (``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AZURE_STORAGE_ACCOUNT_NAME``…);
    give credentials as ``${env:NAME}``: secret values are masked in logs and errors."""
    partition_by: list[str] = []
    """Partition columns (a new table's; an existing table keeps its own and must match)."""
    mode: Literal["append", "merge"] = "append"
    """append: every row is added; merge: upsert on ``merge_keys``."""
    merge_keys: list[str] = []
    """mode merge: the columns identifying a row; the batch's latest row per key replaces the table's
    (latest by receive order: ``_meta.received_at``, then ``_meta.arrival``)."""
    schema_mode: Literal["merge"] | None = None
    """merge: columns the table lacks are added to it; unset: a batch with a new column fails."""
    target_file_size: Bytes = Field(128 * 1024**2, ge=1024**2, le=4 * 1024**3)
    """A task starts a new file past this size; compaction's target too."""
    configuration: dict[str, str] = {}
    """Table properties (``delta.appendOnly``, ``delta.logRetentionDuration``…) set when the table is
    created, and on an existing table where they differ."""
    include_meta: bool = True
    """Keep the ``_meta`` struct (message id, queue, timestamps, attributes...) as a column, without
    the staging fields (receipt handle, raw body, staged file)."""
    app_id: str | None = None
    """The app transaction id of the commits; default: the job's name, ``.``, the sink's name."""
    maintenance_every: int = Field(100, ge=1)
    """Compact and vacuum the table every this many batches (as ``state.maintenance_every``)."""
    optimize: bool = True
    """Compact small files (delta-rs ``optimize.compact``) at maintenance."""
    vacuum_retention: Seconds | None = Field(7 * 86400.0, ge=0)
    """Vacuum files no version references that are older than this (files a failed batch wrote
    included); unset: no vacuum. Readers of older versions need it above their longest read."""
    commit_retries: int = Field(5, ge=0, le=100)
    """Retries of a commit or maintenance step that lost to a concurrent writer; then the batch fails."""

    @field_validator("storage_options")
    @classmethod
    def _mask_credentials(cls, value: dict[str, str]) -> dict[str, str]:
        redact.add([v for k, v in value.items() if _SECRET_OPTION.search(k) and "${env:" not in v])
        return value

    def for_job(self, job: str) -> DeltaSinkConfig:
        """``app_id`` defaults to the job's name, ``.``, the sink's name."""
        return self if self.app_id is not None else self.model_copy(update={"app_id": f"{job}.{self.name}"})

    @model_validator(mode="after")
    def _consistent(self) -> DeltaSinkConfig:
        for key, columns in self.column_options().items():
            if len(set(columns)) != len(columns):
                raise ValueError(f"{key} names a column twice")
        if self.mode == "merge" and not self.merge_keys:
            raise ValueError("mode merge needs merge_keys")
        if self.mode == "append" and self.merge_keys:
            raise ValueError("merge_keys go with mode merge")
        if self.configuration.get("delta.appendOnly", "").lower() == "true" and self.mode == "merge":
            raise ValueError("mode merge rewrites files: not on a table with delta.appendOnly true")
        return self

    def column_options(self) -> dict[str, list[str]]:
        """``partition_by`` and ``merge_keys``: columns of the rows the sink receives."""
        return {"partition_by": self.partition_by, "merge_keys": self.merge_keys}
