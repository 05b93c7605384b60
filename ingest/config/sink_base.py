"""The options every sink config has (name, bad-record policy, its own transform)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ingest.config.sources import NAME
from ingest.config.types import Strict


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
