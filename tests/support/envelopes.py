"""Helpers for the staging tests: envelope lines of simple messages."""

from __future__ import annotations

from ingest.connector import Received
from ingest.intake.envelope import encode


def lines(n: int, start: int = 0) -> list[bytes]:
    """Envelope lines of ``n`` messages ``m<i>`` / ``h<i>`` with bodies ``{"i": <i>}``."""
    msgs = [
        Received(message_id=f"m{i}", receipt_handle=f"h{i}", body=f'{{"i": {i}}}')
        for i in range(start, start + n)
    ]
    return encode("src", "q", "src#0", msgs)
