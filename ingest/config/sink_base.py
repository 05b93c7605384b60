"""The options every sink config has (name, bad-record policy, transform); how a row becomes a body."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar

from pydantic import Field

from ingest.config.connector import DocsTables, FlinkSql, Guarantee, SinkDelivery
from ingest.config.types import NAME, Strict

_S = TypeVar("_S", bound="SinkBase")


class SinkBase(Strict):
    """Options every sink has; a sink's config class subclasses it and declares the class variables."""

    implementation: ClassVar[str]
    """The class that implements the sink, ``"module:Class"`` (built by ``registry.build_sink``)."""
    flinksql: ClassVar[FlinkSql | None]
    """Its Flink SQL connector name and options (None: it has none)."""
    delivery: ClassVar[SinkDelivery]
    """Its delivery guarantee and capabilities, as data."""
    shares_path: ClassVar[bool] = False
    """Two sinks of this type may write under one ``path`` (a fake queue's directory holds several
    queues; a Delta table takes several writers' commits, each with its own app id); other sinks'
    paths never overlap the job's directories or each other."""
    docs_tables: ClassVar[DocsTables] = ()
    """Further option tables on its docs page, after its own: (title, model) of each nested model."""
    if TYPE_CHECKING:
        type: str  # each sink's ``Literal["<its type>"]`` field

    name: str = Field(pattern=NAME)
    """The sink's name (in metrics and errors)."""
    on_bad_record: Literal["fail", "skip", "dead_letter"] = "fail"
    """What happens to a record the target refuses for good (oversized, invalid)."""
    transform: str | None = None
    """Optional ``SELECT … FROM source WHERE …`` that this sink alone gets, over the job's rows
    (after the job's ``transform``); several sinks can take different views of one source."""

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee this sink keeps: the declared one; a config may make it stronger (an SQS
        sink on a FIFO queue)."""
        return self.delivery.guarantee

    def written_columns(self, columns: list[str]) -> list[str]:
        """Of the columns the sink receives, those its target gets (what ``check`` reports): all,
        but ``_meta`` for a sink whose ``include_meta`` option is off (it drops the struct)."""
        from ingest.connector.envelope import META  # here: the config is imported before the contracts

        if not getattr(self, "include_meta", True):
            return [c for c in columns if c != META]
        return columns

    def column_options(self) -> dict[str, list[str]]:
        """Options that name columns of the rows the sink receives, by option name (checked at start)."""
        return {}

    def stop_grace(self) -> float | None:
        """Seconds a stop waits for this sink's running write before it cancels the write (its
        batch then uncommitted, nothing acked); None: a stop waits for the write to end."""
        return None

    def for_job(self: _S, job: str) -> _S:
        """This config as the job named ``job`` runs it (``JobConfig`` calls it once per sink): a
        sink whose option defaults to something of the job's fills it in here (a table sink's
        ``app_id``); most sinks have nothing to do."""
        return self

    checks_target: ClassVar[bool] = False
    """The sink compares its target with the columns it will receive (``Sink.check_target``) in
    ``mq-ingest check``: a table sink whose database may be reachable."""

    def spark_jars(self) -> tuple[list[str], list[str]]:
        """(jars, Maven coordinates) the job adds to its Spark session for this sink (a JDBC driver's)."""
        return [], []


class Serialization(Strict):
    """How a row becomes a message body."""

    body_format: Literal["json", "csv", "raw"] = "json"
    """How a row becomes a message body (the row minus ``_meta``)."""
    body_column: str | None = None
    """Send this column as the body (raw); otherwise the row (minus ``_meta``) is serialized."""
