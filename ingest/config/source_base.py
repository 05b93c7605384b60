"""The options every source config has: how its bodies decode, how its receivers run."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, model_validator

from ingest.config.connector import DocsTables, FlinkSql
from ingest.config.types import NAME, Bytes, Seconds, Strict


class DecodeOptions(Strict):
    """How a source's message bodies decode into the job's schema (reference option names)."""

    format: Literal["json", "csv", "raw", "avro", "parquet", "orc"] = "json"
    """How bodies decode: JSON or CSV into the schema, raw text, or one Avro/Parquet/ORC record set."""
    message_type: Literal["RAW", "OSS"] = Field("RAW", alias="messageType")
    """OSS: bodies are OSS event notifications, flattened to the reference columns."""
    json_fail_on_missing_field: bool = Field(False, alias="json.fail-on-missing-field")
    json_ignore_parse_errors: bool = Field(False, alias="json.ignore-parse-errors")
    json_timestamp_standard: Literal["SQL", "ISO-8601"] = Field(
        "ISO-8601", alias="json.timestamp-format.standard"
    )
    json_timestamp_pattern: str | None = Field(None, alias="json.timestamp-format.pattern")
    csv_delimiter: str = Field(",", alias="csv.field-delimiter", min_length=1, max_length=1)
    max_decoded_rows: int = Field(100_000, ge=1, le=100_000_000)
    """avro, parquet, orc: a body holding more records is a bad message."""
    max_decoded_bytes: Bytes = Field(16 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    """avro, parquet, orc: a body decoding to more bytes is a bad message (a decompression bomb)."""
    on_bad_message: Literal["fail", "skip", "dead_letter"] = "fail"
    """What happens to a body that cannot be decoded: stop the job (the message stays on its
    queue), skip it (counted, acked), or route it to the job's dead-letter target (counted,
    acked). Not given: ``dead_letter`` when the job has a ``dead_letter`` target, else ``fail``;
    ``skip`` when ``json.ignore-parse-errors`` is true (as Flink skips such rows)."""

    @model_validator(mode="after")
    def _oss_needs_json(self) -> DecodeOptions:
        if self.message_type == "OSS" and self.format != "json":
            raise ValueError("messageType OSS requires format json")
        return self


class ReceiveOptions(Strict):
    """Receiver-side options every source has."""

    name: str = Field(pattern=NAME)
    """The source's name (in metrics, the envelope and error messages)."""
    receivers: int = Field(1, ge=1, le=64)
    """Receiver threads polling this source in parallel."""
    processes: int = Field(0, ge=0, le=16)
    """Child processes that make this source's receive, delete and visibility calls, each with a
    GIL of its own (``ingest.intake.processes``); 0: the driver's own threads make them."""
    visibility_timeout: Seconds = Field(30.0, gt=0, le=43200)
    """Seconds a received message stays hidden; the lease keeper extends it while in flight."""
    delete_max_retries: int = Field(3, alias="deleteMaxRetries", ge=0, le=100)
    start_time_ms: int | None = Field(None, alias="startTimeMs", ge=0)
    """Messages enqueued before this instant are skipped, acked and counted."""
    max_outstanding_messages: int | None = Field(None, ge=1, le=10_000_000)
    """This source's receivers pause while this many of its messages are received and not yet
    acked (the job-wide ``staging.max_in_flight`` applies too)."""
    delete_message: bool = True
    """Delete each message once its batch committed; false leaves it on the queue for another
    consumer to delete (a redelivered copy is dropped as a duplicate, and left again)."""
    reset_visibility: bool = True
    """On a stop, make the messages received and not acked visible again at once; false: they
    come back when their visibility timeout runs out."""

    @property
    def ack_calls(self) -> int:
        """Delete and visibility calls a source runs at once: ``max_in_flight_requests`` where
        the source has it and it is set, else its receivers (at least 4). A receive brings at
        most as many messages as one delete takes, and both cost a round trip: with as many
        deletes as receives in flight, acks are never the cap, however long the round trip."""
        given = getattr(self, "max_in_flight_requests", None)
        return given if given is not None else max(4, self.receivers)


class SourceBase(ReceiveOptions, DecodeOptions):
    """Options every source has; a source's config class subclasses it and declares the class variables."""

    implementation: ClassVar[str]
    """The class that implements the source, ``"module:Class"`` (made by ``registry.build_source``)."""
    flinksql: ClassVar[FlinkSql | None]
    """Its Flink SQL connector name and options (None: it has none)."""
    uses_job_schema: ClassVar[bool] = False
    """It makes rows of a ``schema`` of its own (its field ``body_schema``, alias ``schema``), the
    job's ``schema`` when it gives none: one of the two is required (the datagen source)."""
    docs_tables: ClassVar[DocsTables] = ()
    """Further option tables on its docs page, after its own: (title, model) of each nested model."""
    if TYPE_CHECKING:
        type: str  # each source's ``Literal["<its type>"]`` field

    @property
    def poll_wait(self) -> float:
        """Seconds a receive waits for a first message (long polling); a source overrides it."""
        return 1.0
