"""Kept for one release: the source contract moved to ``ingest.connector``, which connectors import now."""

from __future__ import annotations

from ingest.connector.source import AckResult, Received, Source

__all__ = ["AckResult", "Received", "Source"]
