"""What a function sink's author imports: the context, the options decorator, the report, the errors.

A function sink (``type: python``) is ``fn(df, context) -> WriteReport | int | None``; its
contract is in :class:`SinkContext`'s docstring and in ``docs/extending/index.md``.
"""

from __future__ import annotations

from ingest.errors import FatalError, TransientError
from sinks.base import RefusedRecord, WriteReport
from sinks.python.context import SinkContext, sink_options

__all__ = ["FatalError", "RefusedRecord", "SinkContext", "TransientError", "WriteReport", "sink_options"]
