"""How an MNS source or sink reaches its claim-check bucket (OSS over the S3 API): the queue's AccessKey."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ingest.errors import redact


def bucket_access(cfg: Any) -> tuple[Callable[[], Any], dict[str, Any]]:
    """(a maker of a boto3 session with the queue's AccessKey, which OSS takes over the S3 API, no
    proxy), for ``ingest.connector.payload_store.PayloadStore``; the secrets are registered with
    ``redact``."""

    def session() -> Any:
        import boto3

        secret = cfg.access_key_secret.get_secret_value()
        token = cfg.security_token.get_secret_value() if cfg.security_token is not None else None
        redact.add([s for s in (secret, token) if s])
        return boto3.session.Session(
            aws_access_key_id=cfg.access_key_id, aws_secret_access_key=secret, aws_session_token=token
        )

    return session, {}
