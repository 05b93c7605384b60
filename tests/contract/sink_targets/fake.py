"""The fake sink's target: a fake queue, peeked with its store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def fake(request: Any, tmp_path: Path) -> Iterator[Target]:
    from sources.fake.store import FakeQueue

    queue = FakeQueue(str(tmp_path / "q"), "out")
    cfg = {"type": "fake", "path": str(tmp_path / "q"), "queue": "out"}
    yield Target(cfg, lambda: [m.body for m in queue.peek(10_000)])


TARGETS = {"fake": fake}
