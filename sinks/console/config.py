"""The console sink's typed config: rows printed at most, truncation."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.config.connector import FlinkSql, SinkDelivery
from ingest.config.sink_base import SinkBase


class ConsoleSinkConfig(SinkBase):
    """Prints rows to standard output (at-least-once: a replayed batch prints again)."""

    implementation: ClassVar[str] = "sinks.console.sink:ConsoleSink"

    flinksql: ClassVar[FlinkSql | None] = FlinkSql("print", keep_meta=False)
    """``'connector' = 'print'``: it prints the declared columns, without ``_meta``."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery("at_least_once")

    type: Literal["console"]
    max_rows: int = Field(20, ge=1)
    """Rows printed per batch at most."""
    truncate: bool = False
    """Cut long values as Spark's ``show`` does."""
