"""Kept for one release: the send-frame helpers moved to ``ingest.connector``, which connectors import now."""

from __future__ import annotations

from ingest.connector.frame import body_column, executor_error, executor_errors, send_frame, write_partitions

__all__ = ["body_column", "executor_error", "executor_errors", "send_frame", "write_partitions"]
