"""Where a job keeps its files: a local directory or object storage (``s3a://``), behind one small API.

Ground: imports nothing of the project but ``ingest.errors``; state (``checkpoints``), intake,
the runtime and connectors use it.
"""

from ingest.storage.location import hadoop_url, is_object_url, object_url_error, split_object_url
from ingest.storage.store import LocalStore, S3Store, Store, StoreError, store_for

__all__ = [
    "LocalStore",
    "S3Store",
    "Store",
    "StoreError",
    "hadoop_url",
    "is_object_url",
    "object_url_error",
    "split_object_url",
    "store_for",
]
