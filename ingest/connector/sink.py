"""The protocol every sink implements (write one micro-batch DataFrame, close) and what ``write`` returns."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from ingest.errors import FatalError, redact

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class RefusedRecord(Mapping[str, Any]):
    """A record a sink refused for good under its ``on_bad_record`` policy ``skip`` or ``dead_letter``.

    Read as a mapping it is the row the dead-letter target keeps for it: ``sink``,
    ``source_id``, ``error`` and ``action``; a dead-lettered record adds its ``body``, and
    ``body_encoding: base64`` when the body was bytes. It compares equal to that row.

    >>> r = RefusedRecord("out", "m1", "too big", "dead_letter", "x")
    >>> r.action, list(r)
    ('dead_letter', ['sink', 'source_id', 'error', 'action', 'body'])
    >>> "body" in RefusedRecord("out", "m1", "too big", "skip")
    False
    """

    sink: str
    """The refusing sink's name in the job config."""
    source_id: str | None
    """The source message the record came from, if the row still carried it."""
    error: str
    """Why the target refused it."""
    action: Literal["skip", "dead_letter"]
    """The sink's ``on_bad_record`` policy that applied."""
    body: Any = None
    """The record's body, kept for a dead-lettered record only (base64 text if it was bytes)."""
    body_encoding: str | None = None
    """``base64`` when ``body`` holds bytes encoded as text, else None."""

    def _row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"sink": self.sink, "source_id": self.source_id, "error": self.error}
        row["action"] = self.action
        if self.action == "dead_letter":
            row["body"] = self.body
            if self.body_encoding is not None:
                row["body_encoding"] = self.body_encoding
        return row

    def __getitem__(self, key: str) -> Any:
        return self._row()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row())

    def __len__(self) -> int:
        return len(self._row())


@dataclass(frozen=True)
class WriteReport:
    """What a sink's ``write`` did with one micro-batch: its commit message, as PySpark's
    ``DataSourceStreamWriter.write`` returns one.

    >>> WriteReport(3).written, WriteReport(3).rejected
    (3, [])
    """

    written: int
    """Rows the target accepted for good."""
    rejected: list[RefusedRecord] = field(default_factory=list)
    """Records the target refused for good, as :func:`refused_record` made them (``action``
    ``skip`` or ``dead_letter``); the job counts them and routes the dead-letter ones."""


@runtime_checkable
class Sink(Protocol):
    """A target the job writes each micro-batch to.

    Contract:

    * ``write(df, batch_id)`` is called inside ``foreachBatch`` with the deduplicated,
      decoded (and transformed) rows of batch ``batch_id`` and returns a :class:`WriteReport`:
      the rows the target accepted and the records it refused for good under the sink's
      ``on_bad_record`` policy. It returns only when every row is durably accepted or so
      refused, or raises, which fails the batch so Spark replays it with the same
      ``batch_id`` (nothing is lost). Errors are ``ingest.errors.FatalError`` or
      ``TransientError``, the sink's own classification, also when raised on an executor
      (``ingest.connector.frame.write_partitions`` brings them back through Spark's wrapping).
    * A replayed batch may be written again. Sinks that can be idempotent are (files keyed
      on ``batch_id``; SQS FIFO dedup ids and RocketMQ keys derived from the source
      message id); the others are at-least-once, and say so in their docstring.
    * Rows carry a ``_meta`` struct column (the staged envelope) unless the transform
      dropped it; sinks take message ids from ``_meta.message_id``.
    * Clients are created lazily (on executors when writing from ``foreachPartition``),
      so the sink object stays picklable.
    * Every sink class declares ``plan_write`` (``tests/unit/test_capabilities.py`` checks
      it): True when its ``write`` runs the frame's plan exactly once, to the end, as one
      Spark SQL action (not an RDD action). Metrics observed on the frame are then complete
      when ``write`` returns, and the batch handler decodes the batch in the same job instead
      of caching it.
    * The hooks the job calls are declared, never guessed from the methods an object has:
      ``check_target`` is called only for a sink whose config class sets ``checks_target``; the
      jars a sink needs in the Spark session are its config's ``spark_jars()``, and what it takes
      of the job its config's ``for_job`` (all on ``SinkBase``, with the defaults: no check, no
      jars, nothing).
    """

    name: str
    plan_write: ClassVar[bool]
    """``write`` runs the frame's plan once, to the end, as one Spark SQL action."""

    def write(self, df: DataFrame, batch_id: int) -> WriteReport: ...

    def close(self) -> None: ...

    def check_target(self, schema: StructType) -> None:
        """Compare the target with the columns the sink will receive (``schema``), for ``mq-ingest
        check``, before any message is read: a table that cannot take them is a ``FatalError``
        naming the key; a target that cannot be reached only a warning.

        Called only when the sink's config class sets ``checks_target``.
        """


def refused_record(cfg: Any, target: str, source_id: str | None, reason: str, body: Any) -> RefusedRecord:
    """Apply ``cfg.on_bad_record`` to a record ``target`` will never take.

    ``fail`` raises :class:`FatalError` naming the source message, the target and the reason
    (redacted). ``skip`` and ``dead_letter`` log it and return the record for the sink's
    ``rejected`` list; a dead-lettered record carries its body (bytes as base64).
    """
    what = redact(f"record from source message {source_id} refused by {target}: {reason}")
    policy = cfg.on_bad_record
    if policy == "fail":
        raise FatalError(f"{what}; sinks.{cfg.name}.on_bad_record is fail")
    log.warning("%s (%s)", what, "skipped" if policy == "skip" else "dead-lettered")
    if policy != "dead_letter":
        return RefusedRecord(cfg.name, source_id, reason, policy)
    if isinstance(body, (bytes, bytearray)):
        return RefusedRecord(cfg.name, source_id, reason, policy, base64.b64encode(body).decode(), "base64")
    return RefusedRecord(cfg.name, source_id, reason, policy, body)
