"""Where the SQS credential tests get keys: user providers (``module:attribute``), a container endpoint."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any

from botocore.credentials import CredentialProvider, Credentials

from tests.support.local_http import LocalHTTPServer

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYPROVIDER1"
CLASS_KEY = "AKIAPROVIDERCLASS001"
"""The access key id ``KeysProvider`` gives."""

issued: list[str] = []
"""The access key ids ``expiring_keys`` gave, in order (a test clears it)."""
_lock = threading.Lock()


def expiring_keys() -> dict[str, Any]:
    """A provider function: new keys on each call, in the container endpoint's names, expiring in
    5 minutes, which is inside botocore's mandatory refresh window: every request refreshes them."""
    with _lock:
        key = f"AKIAEXPIRING{len(issued):08d}"
        issued.append(key)
    expiry = datetime.now(timezone.utc) + timedelta(minutes=5)
    return {"AccessKeyId": key, "SecretAccessKey": SECRET, "Token": f"token-{key}", "Expiration": expiry}


class KeysProvider(CredentialProvider):
    """A botocore credential provider, named by its class: fixed keys."""

    METHOD = "mq-ingest-test"

    def load(self) -> Credentials:
        return Credentials(CLASS_KEY, SECRET, method=self.METHOD)


class ContainerCredentials(LocalHTTPServer):
    """The ECS/EKS container credentials endpoint (``AWS_CONTAINER_CREDENTIALS_FULL_URI``): serves
    ``key`` with a secret, a token and an expiry an hour away; ``asked`` holds each request's path
    and Authorization header."""

    methods = ("GET",)

    def __init__(self, key: str) -> None:
        self.key = key
        self.token = f"container-token-{key}"
        self.asked: list[tuple[str, str | None]] = []
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        self.asked.append((h.path, h.headers.get("Authorization")))
        expiry = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = json.dumps(
            {"AccessKeyId": self.key, "SecretAccessKey": SECRET, "Token": self.token, "Expiration": expiry}
        ).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
