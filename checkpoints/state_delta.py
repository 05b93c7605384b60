"""The state table's layout in Delta: its schema, settings and location, the schema check, the index load."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from checkpoints.key_index import KeyIndex
from ingest.errors import FatalError
from ingest.storage import is_object_url
from ingest.storage.aws import delta_options
from ingest.storage.errors import store_error
from ingest.storage.location import delta_url

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("batch_id", pa.int64()),
        pa.field("seen_ms", pa.int64()),
    ]
)

# Old JSON commits are only needed for time travel, which nobody does on this table; at one
# commit per micro-batch the 30-day default would keep millions of files in _delta_log.
TABLE_CONFIG = {"delta.logRetentionDuration": "interval 1 days"}

# Compaction stops growing a file at this size. Files stay in commit order, so expiry drops
# whole old files and rewrites at most one; one big file would be rewritten on every expiry.
COMPACT_TARGET_BYTES = 8 * 1024 * 1024


def location(path: str) -> tuple[str, dict[str, str] | None]:
    """The table's URI and storage options as delta-rs takes them: a local path as it is; on S3
    ``s3://`` with the standard AWS settings (``ingest.storage.aws``). Its commits there are atomic
    by conditional PUT (``If-None-Match``), delta-rs's default on S3."""
    return (delta_url(path), delta_options()) if is_object_url(path) else (path, None)


@contextlib.contextmanager
def store_errors(path: str, what: str) -> Iterator[None]:
    """delta-rs's object-store errors on S3 as one line naming ``state.path``, the table (its bucket)
    and the cause, fatal (credentials, no bucket) or transient; a local table's as they are."""
    try:
        yield
    except OSError as err:
        if not is_object_url(path):
            raise
        raise store_error("state.path", f"{what} {path}", err) from None


def check_schema(dt: Any, path: str) -> None:
    """Refuse a Delta table at ``path`` whose schema is not the state schema.

    Raises:
        FatalError: a column of ``SCHEMA`` is missing or has another type (large and view
            strings count as strings).
    """
    found = pa.schema(dt.schema().to_arrow())
    want = {f.name: f.type for f in SCHEMA}
    have = {f.name: f.type for f in found}
    for name, typ in have.items():
        if pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
            have[name] = pa.string()
    if any(have.get(name) != typ for name, typ in want.items()):
        raise FatalError(
            f"state.path {path}: a Delta table with schema {found} is there, not a state table "
            f"(key string, batch_id bigint, seen_ms bigint)"
        )


def load_index(dt: Any, cutoff_ms: int) -> KeyIndex:
    """A ``KeyIndex`` of the table's keys seen at or after ``cutoff_ms``, read from the open table ``dt``."""
    dataset = dt.to_pyarrow_dataset()
    data = dataset.to_table(columns=["key", "seen_ms"], filter=ds.field("seen_ms") >= cutoff_ms)
    index = KeyIndex()
    index.add(data.column("key"), data.column("seen_ms").to_numpy())
    del data
    pa.default_memory_pool().release_unused()  # the scan's buffers; mimalloc keeps them otherwise
    return index
