"""Object-storage URLs: which a path is, its bucket and key, and its spelling for Hadoop and delta-rs."""

from __future__ import annotations

from urllib.parse import urlsplit

S3_SCHEMES = ("s3a", "s3", "s3n")
"""Schemes the Python side reads and writes (through boto3); Hadoop reads them all as S3A."""
HADOOP_ONLY = ("gs", "abfs", "abfss", "wasb", "wasbs", "oss", "hdfs")
"""Schemes only Hadoop reads: a sink path may use them, the job's own files may not (the Python
side, receivers and the state table, has no client for them here)."""


def scheme(path: str) -> str:
    """The URL scheme of ``path`` in lower case, ``""`` for a local path (``file:`` included)."""
    if "://" not in path:
        return ""
    found = path.split("://", 1)[0].lower()
    return "" if found == "file" else found


def is_object_url(path: str) -> bool:
    """Whether ``path`` is on S3 (``s3a://``, ``s3://``, ``s3n://``), as the job's own files may be."""
    return scheme(path) in S3_SCHEMES


def split_object_url(url: str) -> tuple[str, str]:
    """The bucket and the key prefix (no leading or trailing ``/``) of an S3 URL.

    >>> split_object_url("s3a://lake/jobs/orders/")
    ('lake', 'jobs/orders')
    """
    parts = urlsplit(url)
    return parts.netloc, parts.path.strip("/")


def _spelled(path: str, as_scheme: str) -> str:
    """An S3 URL with the scheme ``as_scheme`` and no trailing ``/``; anything else as it is."""
    if not is_object_url(path):
        return path
    bucket, key = split_object_url(path)
    return f"{as_scheme}://{bucket}/{key}" if key else f"{as_scheme}://{bucket}"


def hadoop_url(path: str) -> str:
    """``path`` as Spark is given it: S3 URLs through S3A (``s3a://``), anything else as it is.

    >>> hadoop_url("s3://lake/t/")
    's3a://lake/t'
    """
    return _spelled(path, "s3a")


def delta_url(path: str) -> str:
    """``path`` as delta-rs is given it: S3 URLs as ``s3://``, anything else as it is.

    >>> delta_url("s3a://lake/t")
    's3://lake/t'
    """
    return _spelled(path, "s3")


def object_url_error(path: str) -> str | None:
    """Why ``path`` cannot hold the job's own files (checkpoint, state, staging), or None if it can.

    >>> object_url_error("gs://b/x")
    'gs:// is read by Hadoop only; the checkpoint, state and staging take a local path or s3a://'
    >>> object_url_error("s3a:///x")
    's3a:///x names no bucket'
    """
    found = scheme(path)
    if not found:
        return None
    if found in S3_SCHEMES:
        return None if split_object_url(path)[0] else f"{path} names no bucket"
    if found in HADOOP_ONLY:
        return f"{found}:// is read by Hadoop only; the checkpoint, state and staging take a local path or s3a://"
    return f"{found}:// is not a storage mq-ingest knows (a local path, file:// or s3a://)"
