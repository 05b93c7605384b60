"""The fake queue sink's typed config: the queue's directory, FIFO groups, batches."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.config.connector import FlinkSql, Guarantee, SinkDelivery
from ingest.config.sink_base import Serialization, SinkBase
from ingest.config.types import NAME


class FakeSinkConfig(SinkBase, Serialization):
    """Sends rows to a file-backed fake queue."""

    implementation: ClassVar[str] = "sinks.fake.sink:FakeSink"

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector: the fake queue is for local runs and tests."""

    delivery: ClassVar[SinkDelivery] = SinkDelivery(
        "at_least_once",
        note="On a FIFO queue (`fifo: true`) it is idempotent per message id: the dedup id is the "
        "source message id, and the queue drops a copy within its 5-minute window.",
    )
    shares_path: ClassVar[bool] = True
    """Two fake sinks may share ``path``: the directory holds one file per queue."""

    type: Literal["fake"]
    path: str
    """Directory of the fake queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    """The target queue's name."""
    fifo: bool = False
    """A FIFO queue (group ids from ``group_column``; dedup ids from the source message id)."""
    group_column: str | None = None
    """FIFO: the column holding a row's group id."""
    batch_size: int = Field(100, ge=1, le=1000)
    """Messages per send call."""

    @property
    def guarantee(self) -> Guarantee:
        """Idempotent per message id on a FIFO queue (its dedup ids), else at-least-once."""
        return "idempotent_per_message_id" if self.fifo else self.delivery.guarantee
