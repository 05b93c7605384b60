"""The small protocol every sink implements: write one micro-batch DataFrame, close."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


META = "_meta"
"""Name of the struct column carrying the staged envelope (message id, queue, timestamps...)."""


@runtime_checkable
class Sink(Protocol):
    """A target the job writes each micro-batch to.

    Contract:

    * ``write(df, batch_id)`` is called inside ``foreachBatch`` with the deduplicated,
      decoded (and transformed) rows of batch ``batch_id`` and returns the number of rows
      the target accepted. It returns only when every row is durably accepted, routed by
      the sink's ``on_bad_record`` policy, or raises, which fails the batch so Spark
      replays it with the same ``batch_id`` (nothing is lost).
    * A replayed batch may be written again. Sinks that can be idempotent are (files keyed
      on ``batch_id``; SQS FIFO dedup ids and RocketMQ keys derived from the source
      message id); the others are at-least-once, and say so in their docstring.
    * Rows carry a ``_meta`` struct column (the staged envelope) unless the transform
      dropped it; sinks take message ids from ``_meta.message_id``.
    * Clients are created lazily (on executors when writing from ``foreachPartition``),
      so the sink object stays picklable.
    """

    name: str

    def write(self, df: DataFrame, batch_id: int) -> int: ...

    def close(self) -> None: ...
