"""delta-rs's object-store errors (``OSError: Generic S3 error …``) as the job's own, one line, classified."""

from __future__ import annotations

import re

from ingest.errors import FatalError, IngestError, TransientError, redact

_REFUSED = re.compile(
    r"forbidden|unauthorized|access_?denied|invalid_?access_?key_?id|signature_?does_?not_?match|"
    r"expired_?token|invalid_?token|no_?such_?bucket|authorization_?header_?malformed",
    re.IGNORECASE,
)
"""Object-store answers that retrying cannot change: credentials refused, no such bucket."""
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_REQUEST = re.compile(r"\b(?:GET|PUT|POST|HEAD|DELETE) https?://[^\s?]+")
"""The request that failed, as object_store names it (the URL without its query)."""


def store_error(key: str, what: str, err: OSError) -> IngestError:
    """delta-rs's object-store error as the job's own (the Delta sink's, the state table's), on one
    line: the key, what failed, and the outermost and innermost causes (delta-rs nests them over
    lines, in colour). Fatal when the store refused the credentials or has no such bucket; else
    transient (an outage, a timeout).

    >>> store_error("sinks.lake.path", "read s3://b/t", OSError("Generic S3 error\\n  ↳ Connection refused"))
    TransientError('sinks.lake.path: cannot read s3://b/t: Generic S3 error: Connection refused')
    >>> store_error("k", "open t", OSError("S3 error\\n ↳ GET http://h:9/b/k failed\\n ↳ 403 Forbidden"))
    FatalError('k: cannot open t: S3 error: 403 Forbidden (GET http://h:9/b/k)')
    """
    text = _COLOUR.sub("", str(err))
    lines = [ln.strip().lstrip("↳").strip() for ln in text.splitlines() if ln.strip()]
    lines = lines or [type(err).__name__]
    cause = lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"
    request = _REQUEST.search(text)
    if request:
        cause += f" ({request.group(0)})"
    kind = FatalError if _REFUSED.search(text) else TransientError
    return kind(redact(f"{key}: cannot {what}: {cause}"))
