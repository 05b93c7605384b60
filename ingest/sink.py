"""What a function sink's author imports: the context, the options decorator, the report, the errors.

A function sink (``type: python``) is ``fn(df, context) -> WriteReport | int | None``; its
contract is in :class:`SinkContext`'s docstring and in ``docs/extending/index.md``. The function
sink (``sinks.python``) implements it; nothing here names it.

May import: the ground and ``ingest.connector``. Must not be imported by: nothing (the function
sink and users' functions build on it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ingest.config.callables import function_name
from ingest.connector.sink import RefusedRecord, WriteReport, refused_record
from ingest.errors import FatalError, TransientError

__all__ = ["FatalError", "RefusedRecord", "SinkContext", "TransientError", "WriteReport", "sink_options"]

F = TypeVar("F", bound=Callable[..., Any])

OPTIONS_MODEL = "options_model"
"""The attribute of a function holding the pydantic model of its options (``sink_options``)."""


def sink_options(model: type) -> Callable[[F], F]:
    """Declare a function sink's options as a pydantic model: the sink validates ``options``
    against it when the job is built (``mq-ingest check`` names a bad key as
    ``sinks.<name>.options.<key>``) and passes the model's instance as ``context.options``.

    >>> from pydantic import BaseModel
    >>> class Options(BaseModel):
    ...     table: str
    >>> @sink_options(Options)
    ... def write(df, context): ...
    >>> write.options_model is Options
    True
    """

    def declare(fn: F) -> F:
        setattr(fn, OPTIONS_MODEL, model)
        return fn

    return declare


@dataclass(frozen=True)
class SinkContext:
    """One batch's context, the second argument of a function sink's function ``fn(df, context)``.

    The contract a function relies on:

    * A batch that failed, or whose job was killed before the state commit, is replayed with
      the same ``batch_id`` and the same rows; ``idempotency_key`` is then the same too. Write
      the batch's rows and its key in one transaction (or files named by the key) and skip a
      key already written: the job is then exactly once, as with Spark's ``foreachBatch``.
    * Raise ``ingest.errors.TransientError`` for what another try may fix (a timeout, a
      connection refused): the sink calls the function again under its ``max_retries`` and
      ``backoff.*`` settings, then fails the batch.
    * Any other exception fails the batch: the job stops with exit 1 and one ``error:`` line
      naming the sink and the function; nothing of the batch is acked, so its messages come
      back and the next run replays it.
    * A record the target refuses for good goes through ``refuse``: under the sink's
      ``on_bad_record`` (``fail`` raises, ``skip`` drops it, ``dead_letter`` routes it to the
      job's dead-letter target); return the refused records in a ``WriteReport``.
    * Return a ``WriteReport`` (rows written, records refused), an ``int`` (rows written), or
      None (the sink then counts the batch's rows: one more Spark job).
    """

    batch_id: int
    """The micro-batch's id; a replay carries the same one."""
    job: str
    """The job's name."""
    sink: str
    """The sink's name in the job's config."""
    options: Any
    """The sink's ``options``: a dict, or the instance of the function's ``options_model``."""
    policy: Any = field(default=None, repr=False, compare=False)
    """The sink's config, whose ``on_bad_record`` applies in ``refuse``."""

    @property
    def idempotency_key(self) -> str:
        """``<job>/<sink>/<batch_id>``: the same for a batch and its replays, unique across the
        job's sinks and across jobs (names cannot hold ``/``)."""
        return f"{self.job}/{self.sink}/{self.batch_id}"

    def refuse(self, source_id: str | None, reason: str, body: Any = None) -> RefusedRecord:
        """A record the target will never take, under the sink's ``on_bad_record``: raises
        ``FatalError`` for ``fail``, else returns the record to put in ``WriteReport.rejected``
        (a dead-lettered one keeps ``body``)."""
        target = f"function {function_name(self.policy.function)}"
        return refused_record(self.policy, target, source_id, reason, body)
