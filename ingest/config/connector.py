"""What a connector declares besides its options: its Flink SQL name, its guarantee, its capabilities."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel


def type_name(model: type[BaseModel]) -> str:
    """A connector config's ``type`` (``sqs``, ``delta``)."""
    return typing.get_args(model.model_fields["type"].annotation)[0]


def option_names(model: type[BaseModel], derived: frozenset[str] = frozenset()) -> dict[str, str]:
    """Each option name a model takes (its field names and aliases, but ``derived``) → its field."""
    names = {}
    for name, info in model.model_fields.items():
        if name not in derived:
            names[name] = name
            if info.alias:
                names[info.alias] = name
    return names


class FlinkTable(Protocol):
    """One Flink SQL table's WITH options on their way into a config dict (``ingest.flinksql``)."""

    options: dict[str, tuple[str, Any]]
    """The options not read yet: name → (value, where the script gives it)."""
    out: dict[str, Any]
    """The config being built."""
    columns: list[tuple[str, str]]
    """The table's declared columns: (name, SQL type)."""

    def pop(self, key: str) -> tuple[str, Any] | None:
        """Take an option (value, where) out of ``options``; None if the table does not give it."""

    def refuse(self, message: str, where: Any = None) -> Exception:
        """The error to raise, naming the table and where (default: the table's position)."""


@dataclass(frozen=True)
class FlinkSql:
    """A connector's Flink SQL declaration: its ``'connector' = …`` name and the options it adds.

    A table's other WITH options are the config's own, by field name or alias. Declared on the
    config class as ``flinksql`` (None: the connector has no Flink SQL name).
    """

    connector: str
    """The ``'connector'`` value of a table that is this connector (``sqs``, ``filesystem``, ``print``)."""
    aliases: Mapping[str, str] = field(default_factory=dict)
    """Further option names: a WITH option → the config key it sets (Kafka Connect's ``tasks.max``)."""
    ignored: tuple[str, ...] = ()
    """Options accepted with no effect (the MNS sink's ``region``: its endpoint names the region)."""
    formats: Mapping[str, str] | None = None
    """A sink's ``format`` option: each value → the value of ``format_key``; None: no ``format``."""
    format_key: str = "format"
    """The config key a sink's ``format`` sets."""
    formats_refused: str = ""
    """Why another ``format`` value is refused (``the filesystem sink writes json or parquet``)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Config values a table gets unless its options set them."""
    read: Callable[[FlinkTable], None] | None = None
    """Reads the options only this connector has (popping them) into the config being built."""
    keep_meta: bool = True
    """A sink's INSERT carries ``_meta`` (the message ids it keys on) besides the declared columns."""
    schema_from_columns: bool = False
    """Checked alone, the table's columns stand in for the config's ``schema`` (datagen's is the job's)."""


DocsTables = tuple[tuple[str, type[BaseModel]], ...]
"""Further option tables on a connector's docs page: (title, model) for each model its options nest."""


Guarantee = Literal["at_least_once", "idempotent_per_batch", "idempotent_per_message_id"]
"""What a replayed batch (a crash between the write and Spark's commit) does at the target."""

GUARANTEES: dict[str, str] = {
    "at_least_once": "at-least-once: a replayed batch is written again (a row may arrive twice)",
    "idempotent_per_batch": "exactly-once, idempotent per batch: a replayed batch leaves the target "
    "as it was",
    "idempotent_per_message_id": "exactly-once, idempotent per message id: the target drops a second "
    "copy of a message it holds",
}
"""How each guarantee reads in ``mq-ingest check`` and on the docs pages."""


@dataclass(frozen=True)
class SinkDelivery:
    """A sink's delivery guarantee and capabilities, declared on its config class as ``delivery``.

    ``mq-ingest check``, the docs page's guarantee line and the sink contract suite
    (``tests/contract/test_sink_contract.py``) read it; nothing else lists them.
    """

    guarantee: Guarantee
    """What a replayed batch does at the target (a config may make it stronger: ``SinkBase.guarantee``)."""
    refuses_records: bool = False
    """The target refuses some records for good (a size limit): ``on_bad_record`` applies to them."""
    skips_replayed_batch: bool = False
    """A replayed batch the target already holds is not written again: ``write`` reports 0 rows."""
    note: str = ""
    """One sentence more for the docs page (how the guarantee is kept, what makes it stronger)."""

    def line(self) -> str:
        """The docs page's guarantee line."""
        text = f"**Delivery:** {GUARANTEES[self.guarantee]}."
        if self.refuses_records:
            text += " Records the target refuses for good follow `on_bad_record`."
        return f"{text} {self.note}".strip()
