"""Kept for one release: the sink contract moved to ``ingest.connector``, which connectors import now."""

from __future__ import annotations

from ingest.connector.envelope import META, STAGING_FIELDS
from ingest.connector.sink import RefusedRecord, Sink, WriteReport, refused_record

__all__ = ["META", "STAGING_FIELDS", "RefusedRecord", "Sink", "WriteReport", "refused_record"]
