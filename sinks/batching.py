"""Kept for one release: the send buffer moved to ``ingest.connector`` (``SendBuffer``, ``write_rows``)."""

from __future__ import annotations

from ingest.connector.send_buffer import SendBuffer, write_rows
from ingest.connector.send_target import CallRefused, Failed, Limits, RetryPolicy, SendTarget

Batcher = SendBuffer
BatchRefused = CallRefused
BatchTarget = SendTarget

__all__ = ["BatchRefused", "BatchTarget", "Batcher", "Failed", "Limits", "RetryPolicy", "write_rows"]
