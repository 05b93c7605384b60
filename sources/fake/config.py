"""The fake queue source's typed config: the queue's directory, its batches, the demo seed."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.config.connector import FlinkSql
from ingest.config.source_base import SourceBase
from ingest.config.types import NAME, Seconds, Strict


class FakeSeed(Strict):
    """Demo messages put on a fake queue at start (the embedded default job uses this)."""

    messages: int = Field(1000, ge=0)
    duplicates: int = Field(0, ge=0)
    malformed: int = Field(0, ge=0)
    only_if_empty: bool = True


class FakeSourceConfig(SourceBase):
    """The file-backed local fake queue."""

    implementation: ClassVar[str] = "sources.fake.source:FakeSource"

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector: the fake queue is for local runs and tests."""

    type: Literal["fake"]
    path: str
    """Directory holding the queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    fifo: bool = False
    batch_size: int = Field(100, ge=1, le=1000)
    wait_time: Seconds = Field(1.0, ge=0, le=30)
    seed: FakeSeed | None = None

    @property
    def poll_wait(self) -> float:
        """Seconds a receive long-polls for the first message."""
        return self.wait_time
