"""The datagen source's typed config: the generated rows' schema, rate, count and fields."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ingest.config.connector import DocsTables, FlinkSql, FlinkTable, option_names
from ingest.config.source_base import SourceBase
from ingest.config.types import Seconds, Strict


class DatagenField(Strict):
    """How one column of a datagen source is generated (Flink datagen ``fields.<name>.*`` options)."""

    kind: Literal["random", "sequence"] = "random"
    """``random`` values within the limits below, or a ``sequence`` from ``start`` to ``end``."""
    min: float | None = None
    """random numbers: the smallest value (default: the type's range, or 0 for decimals)."""
    max: float | None = None
    """random numbers: the largest value (default: the type's range)."""
    max_past: Seconds = Field(0.0, alias="max-past", ge=0)
    """random timestamps: at most this long before now (0: now)."""
    length: int = Field(100, ge=0, le=1_000_000)
    """random strings and bytes: their length; arrays and maps: their size."""
    var_len: bool = Field(False, alias="var-len")
    """random strings and bytes: a random length up to ``length``."""
    start: int | None = None
    """sequence: the first value."""
    end: int | None = None
    """sequence: the last value (the source ends there)."""
    null_rate: float = Field(0.0, alias="null-rate", ge=0, le=1)
    """The share of rows where the column is null, 0 to 1."""

    @model_validator(mode="after")
    def _bounds(self) -> DatagenField:
        if self.kind == "sequence" and (self.start is None or self.end is None):
            raise ValueError("kind sequence needs start and end")
        if self.kind == "sequence" and self.start > self.end:  # type: ignore[operator]
            raise ValueError("sequence start must not exceed end")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min must not exceed max")
        return self


def _fields(t: FlinkTable) -> None:
    """Flink's ``fields.<column>.<option>`` options: how each column is generated."""
    columns = {name for name, _ in t.columns}
    fields: dict[str, dict[str, str]] = {}
    for key in [k for k in t.options if k.startswith("fields.")]:
        value, where = t.options.pop(key)
        _, _, rest = key.partition(".")
        column, _, option = rest.rpartition(".")
        if column not in columns:
            raise t.refuse(f"option {key!r}: {column!r} is not a column of the table", where)
        if option not in option_names(DatagenField):
            known = sorted(option_names(DatagenField))
            raise t.refuse(f"option {key!r}: datagen fields take {known}", where)
        fields.setdefault(column, {})[option] = value
    if fields:
        t.out["fields"] = fields


class DatagenSourceConfig(SourceBase):
    """Generated rows (Flink's ``datagen`` connector), to try a job with no queue at all.

    Rows are JSON bodies of ``schema`` (the job's schema when not given), ``rows-per-second``
    at most, ``number-of-rows`` in all (a ``sequence`` field ends the source too when its
    sequence does; neither: unbounded). Row ``n`` is the same on every run (seeded by ``seed``
    and ``n``), its message id ``<name>-<n>``: after a restart the source starts again at row
    0 and the state table drops the rows already written.
    """

    implementation: ClassVar[str] = "sources.datagen.source:DatagenSource"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql("datagen", read=_fields, schema_from_columns=True)
    """``'connector' = 'datagen'``: ``fields.<column>.<option>`` options, the table's columns its schema."""

    uses_job_schema: ClassVar[bool] = True
    """Without a ``schema`` of its own it generates the job's."""
    docs_tables: ClassVar[DocsTables] = (("datagen fields.<column>", DatagenField),)

    type: Literal["datagen"]
    processes: int = Field(0, ge=0, le=0)
    """Always 0: rows are made in the driver (each child process would make the sequence anew)."""
    body_schema: str | None = Field(None, alias="schema")
    """Spark DDL of the generated rows; default: the job's ``schema``."""
    rows_per_second: float = Field(10_000, alias="rows-per-second", gt=0, le=10_000_000)
    """Rows generated a second at most."""
    number_of_rows: int | None = Field(None, alias="number-of-rows", ge=0)
    """Rows in all: the source is bounded and the job ends once they are written; unset: unbounded."""
    fields: dict[str, DatagenField] = {}
    """Per column: how its values are generated (``fields.<column>``, below)."""
    seed: int = 0
    """The random seed: row n is the same on every run with the same seed."""
    batch_size: int = Field(1000, ge=1, le=10_000)
    """Rows a receive brings at most."""

    @property
    def poll_wait(self) -> float:
        return 0.5

    @model_validator(mode="after")
    def _json_bodies(self) -> DatagenSourceConfig:
        if self.format != "json" or self.message_type != "RAW":
            raise ValueError("a datagen source makes JSON bodies: format json, messageType RAW")
        return self
