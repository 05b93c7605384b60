"""The fake queue source's typed config: the queue's directory, its batches, the demo seed."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.config.connector import DocsTables, FlinkSql
from ingest.config.source_base import SourceBase
from ingest.config.types import NAME, Seconds, Strict


class FakeSeed(Strict):
    """Demo messages put on a fake queue at start (the embedded default job uses this)."""

    messages: int = Field(1000, ge=0)
    """JSON events to put on the queue."""
    duplicates: int = Field(0, ge=0)
    """Of those, how many are sent a second time (redeliveries to drop)."""
    malformed: int = Field(0, ge=0)
    """Bodies that are not JSON, added to test the bad-message path."""
    only_if_empty: bool = True
    """Seed only a queue that holds no message (a rerun does not add more)."""


class FakeSourceConfig(SourceBase):
    """The file-backed local fake queue."""

    implementation: ClassVar[str] = "sources.fake.source:FakeSource"

    flinksql: ClassVar[FlinkSql | None] = None
    """No Flink SQL connector: the fake queue is for local runs and tests."""

    docs_tables: ClassVar[DocsTables] = (("fake seed", FakeSeed),)

    type: Literal["fake"]
    path: str
    """Directory holding the queue's durable file."""
    queue: str = Field("default", pattern=NAME)
    """The queue's name (its file is ``<path>/<queue>.db``)."""
    fifo: bool = False
    """A FIFO queue: group ids, order per group, deduplication ids."""
    batch_size: int = Field(100, ge=1, le=1000)
    """Messages a receive brings at most."""
    wait_time: Seconds = Field(1.0, ge=0, le=30)
    """How long a receive waits for a first message (long polling)."""
    seed: FakeSeed | None = None
    """Demo messages put on the queue at start (``fake seed``, below)."""

    @property
    def poll_wait(self) -> float:
        """Seconds a receive long-polls for the first message."""
        return self.wait_time
