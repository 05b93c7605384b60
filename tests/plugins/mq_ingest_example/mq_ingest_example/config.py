"""The plugin's config classes: what the registry loads for every job, so nothing heavy here."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from ingest.connector import FlinkSql, SinkBase, SinkDelivery, SourceBase


class CounterSourceConfig(SourceBase):
    """A bounded source of ``messages`` JSON events ``{"n": …, "text": …}``."""

    implementation: ClassVar[str] = "mq_ingest_example.source:CounterSource"
    flinksql: ClassVar[FlinkSql | None] = None

    type: Literal["counter"]
    messages: int = Field(ge=0, le=1_000_000)
    """How many events the source holds."""
    prefix: str = "event-"
    """Each event's ``text`` is this and its number."""


class JsonlSinkConfig(SinkBase):
    """One JSON-lines file per batch; a replayed batch replaces its own file."""

    implementation: ClassVar[str] = "mq_ingest_example.sink:JsonlSink"
    flinksql: ClassVar[FlinkSql | None] = FlinkSql("example-jsonl")
    delivery: ClassVar[SinkDelivery] = SinkDelivery("idempotent_per_batch", refuses_records=True)

    type: Literal["jsonl"]
    path: str
    """The directory of the ``batch_id=<N>.jsonl`` files."""
    max_record_bytes: int = Field(1_000_000, ge=1)
    """Longer records are refused (``on_bad_record``)."""
