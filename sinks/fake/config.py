"""The fake queue sink's typed config: the queue's directory, FIFO groups, batches."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.config.connector import FlinkSql
from ingest.config.sink_base import Serialization, SinkBase
from ingest.config.types import NAME


class FakeSinkConfig(SinkBase, Serialization):
    """Sends rows to a file-backed fake queue."""

    implementation: ClassVar[str] = "sinks.fake.sink:FakeSink"
    """The module and class that implement it (registering a connector: its folder, and this
    class in the union of ``ingest.config.sinks``)."""

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector: the fake queue is for local runs and tests."""

    type: Literal["fake"]
    path: str
    """Directory of the fake queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    fifo: bool = False
    group_column: str | None = None
    batch_size: int = Field(100, ge=1, le=1000)
