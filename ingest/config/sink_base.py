"""The options every sink config has (name, bad-record policy, transform); how a row becomes a body."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ingest.config.types import NAME, Strict


class SinkBase(Strict):
    """Options every sink has."""

    name: str = Field(pattern=NAME)
    """The sink's name (in metrics and errors)."""
    on_bad_record: Literal["fail", "skip", "dead_letter"] = "fail"
    """What happens to a record the target refuses for good (oversized, invalid)."""
    transform: str | None = None
    """Optional ``SELECT … FROM source WHERE …`` that this sink alone gets, over the job's rows
    (after the job's ``transform``); several sinks can take different views of one source."""

    def column_options(self) -> dict[str, list[str]]:
        """Options that name columns of the rows the sink receives, by option name (checked at start)."""
        return {}

    def spark_jars(self) -> tuple[list[str], list[str]]:
        """(jars, Maven coordinates) the job adds to its Spark session for this sink (a JDBC driver's)."""
        return [], []


class Serialization(Strict):
    """How a row becomes a message body."""

    body_format: Literal["json", "csv", "raw"] = "json"
    """How a row becomes a message body (the row minus ``_meta``)."""
    body_column: str | None = None
    """Send this column as the body (raw); otherwise the row (minus ``_meta``) is serialized."""
