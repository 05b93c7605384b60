"""How an SQS source or sink reaches its claim-check bucket: the queue's credentials and proxy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sources.sqs.client import _register_secrets, _session, proxy_config


def bucket_access(cfg: Any) -> tuple[Callable[[], Any], dict[str, Any]]:
    """(a maker of a boto3 session with the queue's credentials provider, botocore ``Config``
    arguments for the queue's proxy, which carries the bucket's calls too), for
    ``ingest.connector.payload_store.PayloadStore``; the secrets they use are registered with
    ``redact`` (the proxy's password, in its own key or in its URL)."""
    proxy = proxy_config(cfg) if cfg.proxy_url else {}
    if proxy:
        _register_secrets(cfg)

    def session() -> Any:
        _register_secrets(cfg)
        return _session(cfg)

    return session, proxy
