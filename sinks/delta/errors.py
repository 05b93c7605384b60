"""The Delta sink's object-store errors: delta-rs's ``OSError`` as the sink's own, classified
(``ingest.storage.errors``, which the state table shares)."""

from __future__ import annotations

from ingest.storage.errors import store_error

__all__ = ["store_error"]
