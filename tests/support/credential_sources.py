"""Where the SQS credential tests get keys: providers of a user's own (``module:attribute``)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.credentials import CredentialProvider, Credentials

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
