"""The sink contract every sink passes (``sinks.base.Sink``): a ``WriteReport`` with the rows the
target took and the records it refused by policy, and a replayed batch as each sink promises.

Each sink writes to its real target on 127.0.0.1: files, stdout, the fake queue, SQS on moto,
MNS on the emulator, RocketMQ on both transports (the remoting and gRPC emulators), a Delta table
on disk, all through the clients a user runs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ingest.config import parse_config
from ingest.errors import FatalError
from sinks import build_sink
from sinks.base import Sink, WriteReport

pytestmark = [pytest.mark.spark, pytest.mark.integration]
KINDS = ["files", "console", "fake", "sqs", "sqs-fifo", "mns", "rocketmq", "rocketmq-grpc", "delta"]
KINDS += ["python", "spark_writer"]
REFUSING = ["sqs", "sqs-fifo", "mns", "rocketmq", "rocketmq-grpc", "python"]
"""Sinks with a size limit, so a record they refuse for good can be made (the function sink's
function here refuses a row over 1000 bytes through ``context.refuse``)."""
IDEMPOTENT = {"files", "sqs-fifo", "delta", "python"}
"""A replayed batch leaves the target as it was (files overwrite their batch, FIFO dedups, the
Delta table holds the batch's version and writes nothing, the function here replaces its batch's
file); the others are at-least-once and say so."""


@dataclass
class Target:
    config: dict[str, Any]
    """The sink's config (without ``name``); a record over ~1000 bytes is refused where it can be."""
    read: Callable[[], list[str]]
    """What the target holds: one text per message or row."""


@pytest.fixture
def target(request, tmp_path, capfd) -> Iterator[Target]:
    kind = request.param
    if kind == "files":
        from tests.support.jobs import read_jsonl_dir

        out = tmp_path / "out"
        yield Target(
            {"type": "files", "path": str(out)}, lambda: [json.dumps(r) for r in read_jsonl_dir(out)]
        )
    elif kind == "console":
        yield Target({"type": "console", "max_rows": 1000}, lambda: _printed(capfd.readouterr().out))
    elif kind == "fake":
        from sources.fake.store import FakeQueue

        queue = FakeQueue(str(tmp_path / "q"), "out")
        yield Target({"type": "fake", "path": str(tmp_path / "q"), "queue": "out"}, lambda: _bodies(queue))
    elif kind.startswith("sqs"):
        yield from _sqs(request, kind == "sqs-fifo")
    elif kind == "mns":
        yield from _mns(request)
    elif kind == "delta":
        yield Target({"type": "delta", "path": str(tmp_path / "table")}, lambda: _rows(tmp_path / "table"))
    elif kind == "python":
        function = "tests.support.user_functions:write_jsonl"
        cfg = {"type": "python", "function": function, "options": {"path": str(tmp_path / "store")}}
        yield Target(cfg, lambda: _lines(tmp_path / "store", "*.jsonl"))
    elif kind == "spark_writer":
        cfg = {"type": "spark_writer", "format": "json", "path": str(tmp_path / "out")}
        yield Target(cfg, lambda: _lines(tmp_path / "out", "part-*"))
    else:
        yield from _rocketmq(tmp_path, "grpc" if kind == "rocketmq-grpc" else "remoting")


def _printed(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("|") and "id" not in line.split("|")[1]]


def _lines(directory: Path, pattern: str) -> list[str]:
    """The JSON lines of the files under ``directory`` matching ``pattern``, read as text."""
    return [line for f in sorted(directory.glob(pattern)) for line in f.read_text().splitlines() if line]


def _rows(table: Path) -> list[str]:
    """The Delta table's rows as JSON, read with deltalake (not the sink's code)."""
    from deltalake import DeltaTable

    return [json.dumps({"id": r["id"]}) for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist()]


def _bodies(queue: Any) -> list[str]:
    return [m.body for m in queue.peek(10_000)]


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


def _mns(request: Any) -> Iterator[Target]:
    from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, drain

    mns = request.getfixturevalue("mns")
    queue = create_queue(mns.url)
    cfg = {"type": "mns", "endpoint": mns.url, "queueName": queue, "accessKeyId": AK_ID}
    cfg |= {"accessKeySecret": AK_SECRET, "max_body_bytes": 1000, "base64_body": False}
    got: list[str] = []

    def read() -> list[str]:
        got.extend(m.message_body for m in drain(mns.url, queue, raw=True))
        return list(got)

    yield Target(cfg, read)


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


def build(target: Target, **options: Any) -> Sink:
    config = {"name": "t", "sources": [{"type": "fake", "name": "s", "path": "unused"}], "schema": "a INT"}
    config |= {"sinks": [{**target.config, "name": "out", **options}], "checkpoint": "c"}
    config |= {"state": {"path": "s"}, "staging": {"dir": "d"}}
    if options.get("on_bad_record") == "dead_letter":
        config["dead_letter"] = {"path": "dl"}
    return build_sink(parse_config(config).sinks[0])


def frame(spark: Any, n: int, big: int | None = None):
    rows = [(i, "x" * (5000 if i == big else 8), (f"m{i}", f"g{i % 2}")) for i in range(n)]
    return spark.createDataFrame(
        rows, "id BIGINT, text STRING, _meta STRUCT<message_id: STRING, group_id: STRING>"
    )


def ids(texts: list[str]) -> list[int]:
    out = []
    for t in texts:
        if t.startswith("|"):
            out.append(int(t.split("|")[1]))
        else:
            out.append(int(t.split(",")[0]) if not t.startswith("{") else json.loads(t)["id"])
    return sorted(out)


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_a_write_reports_the_rows_the_target_took(spark, target):
    report = build(target).write(frame(spark, 12), 0)
    assert report == WriteReport(12, [])
    assert ids(target.read()) == list(range(12))


@pytest.mark.parametrize("target", REFUSING, indirect=True)
def test_a_record_refused_for_good_follows_the_policy(spark, target):
    df = frame(spark, 6, big=3)
    skipped = build(target, on_bad_record="skip").write(df, 0)
    assert skipped.written == 5 and [(r["source_id"], r["action"]) for r in skipped.rejected] == [
        ("m3", "skip")
    ]
    assert ids(target.read()) == [0, 1, 2, 4, 5]
    dead = build(target, on_bad_record="dead_letter").write(frame(spark, 6, big=3).where("id = 3"), 1)
    assert dead.written == 0 and [r["action"] for r in dead.rejected] == ["dead_letter"]
    record = dead.rejected[0]
    body = (
        base64.b64decode(record["body"]).decode()
        if record.get("body_encoding") == "base64"
        else record["body"]
    )
    assert "x" * 5000 in body  # the body goes with it to the dead-letter target
    with pytest.raises(FatalError, match="m3"):
        build(target, on_bad_record="fail").write(df, 2)


@pytest.mark.parametrize("target", KINDS, indirect=True)
def test_a_replayed_batch_is_written_as_the_sink_promises(spark, target):
    sink = build(target)
    df = frame(spark, 5)
    assert sink.write(df, 4).written == 5
    again = sink.write(df, 4).written  # Spark replays batch 4 after a crash
    assert again == (0 if target.config["type"] == "delta" else 5)  # Delta: the table has it
    held = ids(target.read())
    fifo = target.config.get("sqsUrl", "").endswith(".fifo")
    if target.config["type"] in ("files", "delta", "python") or fifo:
        assert held == list(
            range(5)
        )  # idempotent: the batch overwritten, or the copies dropped by FIFO dedup
    else:
        assert held == sorted([*range(5), *range(5)])  # at-least-once: a second copy of each


def test_every_sink_type_is_in_the_suite():
    import typing

    from ingest.config.sinks import SinkConfig

    union = typing.get_args(SinkConfig)[0]
    types = {typing.get_args(m.model_fields["type"].annotation)[0] for m in typing.get_args(union)}
    assert types == {k.split("-")[0] for k in KINDS}, "a new sink must join the contract suite"
