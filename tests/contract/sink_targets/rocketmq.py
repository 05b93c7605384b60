"""The RocketMQ sink's targets: a topic on the remoting and on the gRPC emulator, read from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sink_contract import Target


def _rocketmq(tmp_path: Path, transport: str) -> Iterator[Target]:
    from tests.support.rocketmq_servers import AK_ID, AK_SECRET, emulator, installed, messages

    if not installed(transport):
        pytest.skip(f"the RocketMQ {transport} client is not installed")
    server = emulator(transport, str(tmp_path / "logs"), credentials={AK_ID: AK_SECRET})
    cfg = {"type": "rocketmq", "endpoint": server.address, "topic": "t", "producerGroup": "G"}
    cfg |= {"accessId": AK_ID, "accessKey": AK_SECRET, "max_message_size": 1000, "payload": "json"}
    cfg |= {"retryTimes": 1, "sleepTimeMs": 10, "client_log_dir": str(tmp_path / "logs")}
    cfg |= {"transport": transport}
    try:
        yield Target(cfg, lambda: [m.body.decode() for m in messages(server)])
    finally:
        server.stop()


def remoting(request: Any, tmp_path: Path) -> Iterator[Target]:
    yield from _rocketmq(tmp_path, "remoting")


def grpc(request: Any, tmp_path: Path) -> Iterator[Target]:
    yield from _rocketmq(tmp_path, "grpc")


TARGETS = {"rocketmq": remoting, "rocketmq-grpc": grpc}
