"""Kept for one release: the send target moved to ``ingest.connector`` (``SendTarget``, ``CallRefused``)."""

from __future__ import annotations

from ingest.connector.send_target import CallRefused, E, Failed, Limits, RetryPolicy, SendTarget

BatchRefused = CallRefused
BatchTarget = SendTarget

__all__ = ["BatchRefused", "BatchTarget", "E", "Failed", "Limits", "RetryPolicy"]
