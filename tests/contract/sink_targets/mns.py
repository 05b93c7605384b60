"""The MNS sink's target: a queue on the MNS emulator, drained through its HTTP API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def mns(request: Any, tmp_path: Path) -> Iterator[Target]:
    from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, drain

    server = request.getfixturevalue("mns")
    queue = create_queue(server.url)
    cfg = {"type": "mns", "endpoint": server.url, "queueName": queue, "accessKeyId": AK_ID}
    cfg |= {"accessKeySecret": AK_SECRET, "max_body_bytes": 1000, "base64_body": False}
    got: list[str] = []

    def read() -> list[str]:
        got.extend(m.message_body for m in drain(server.url, queue, raw=True))
        return list(got)

    yield Target(cfg, read)


TARGETS = {"mns": mns}
