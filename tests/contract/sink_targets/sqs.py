"""The SQS sink's targets: a standard and a FIFO queue on moto, drained with boto3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.sink_contract import Target


def _sqs(request: Any, fifo: bool) -> Iterator[Target]:
    from tests.support.sqs_server import drain

    moto_url, make_queue, sqs = (request.getfixturevalue(f) for f in ("moto_url", "make_queue", "sqs"))
    url = make_queue(fifo=fifo)
    cfg = {"type": "sqs", "sqsUrl": url, "aws.endpoint": moto_url, "maxRecordSizeInBytes": 1000}
    got: list[str] = []

    def read() -> list[str]:
        got.extend(drain(sqs, url))
        return list(got)

    yield Target(cfg, read)


def standard(request: Any, tmp_path: Path) -> Iterator[Target]:
    yield from _sqs(request, fifo=False)


def fifo(request: Any, tmp_path: Path) -> Iterator[Target]:
    yield from _sqs(request, fifo=True)


TARGETS = {"sqs": standard, "sqs-fifo": fifo}
