"""The sink contract every sink passes (``sinks.base.Sink``): a ``WriteReport`` with the rows the
target took and the records it refused by policy, and a replayed batch as each sink promises.

Each sink writes to its real target on 127.0.0.1: files, stdout, the fake queue, SQS on moto,
MNS on the emulator, RocketMQ on both transports (the remoting and gRPC emulators), a Delta table
on disk, a PostgreSQL table, all through the clients a user runs; and the example plugin's sink
(``tests/plugins/mq_ingest_example``), registered in code. The sinks are the registry's: what each
promises (records it refuses, a replayed batch) is its declaration (``SinkDelivery``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ingest.config import parse_config, registry
from ingest.config.connector import type_name
from ingest.config.registry import build_sink
from ingest.connector import Sink, WriteReport
from ingest.errors import FatalError
from tests.support import plugins

pytestmark = [pytest.mark.spark, pytest.mark.integration]
SINKS = {type_name(m): m for m in [*registry.connectors("sinks"), *plugins.configs()["sinks"]]}
"""Every sink type: the registry's (built-ins and installed plugins) and the example plugin's."""
VARIANTS = {"sqs-fifo": "sqs", "rocketmq-grpc": "rocketmq"}
"""Second targets of a sink type: a FIFO queue, RocketMQ's other transport."""
KINDS = [*SINKS, *VARIANTS]
REFUSING = [k for k in KINDS if SINKS[VARIANTS.get(k, k)].delivery.refuses_records]  # type: ignore[attr-defined]
"""Sinks that declare they refuse records (a size limit), so a record they refuse for good can be made."""


@dataclass
class Target:
    config: dict[str, Any]
    """The sink's config (without ``name``); a record over ~1000 bytes is refused where it can be."""
    read: Callable[[], list[str]]
    """What the target holds: one text per message or row."""
    idempotent: bool = False
    """This test's target is idempotent per batch although its type promises less (the function
    sink's suite function replaces its batch's file)."""


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
    elif kind == "jdbc":
        yield _jdbc(request)
    elif kind == "python":
        function = "tests.support.user_functions:write_jsonl"
        cfg = {"type": "python", "function": function, "options": {"path": str(tmp_path / "store")}}
        yield Target(cfg, lambda: _lines(tmp_path / "store", "*.jsonl"), idempotent=True)
    elif kind == "spark_writer":
        cfg = {"type": "spark_writer", "format": "json", "path": str(tmp_path / "out")}
        yield Target(cfg, lambda: _lines(tmp_path / "out", "part-*"))
    elif kind.startswith("rocketmq"):
        yield from _rocketmq(tmp_path, "grpc" if kind == "rocketmq-grpc" else "remoting")
    elif kind == "jsonl":  # the example plugin's
        from tests.support.jobs import read_jsonl_dir

        with plugins.registered():
            out = tmp_path / "out"
            cfg = {"type": "jsonl", "path": str(out), "max_record_bytes": 1000}
            yield Target(cfg, lambda: [json.dumps(r) for r in read_jsonl_dir(out)])
    else:
        raise AssertionError(f"no target for the sink type {kind!r}: add one to this fixture")


def _printed(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("|") and "id" not in line.split("|")[1]]


def _lines(directory: Path, pattern: str) -> list[str]:
    """The JSON lines of the files under ``directory`` matching ``pattern``, read as text."""
    return [line for f in sorted(directory.glob(pattern)) for line in f.read_text().splitlines() if line]


def _rows(table: Path) -> list[str]:
    """The Delta table's rows as JSON, read with deltalake (not the sink's code)."""
    from deltalake import DeltaTable

    return [json.dumps({"id": r["id"]}) for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist()]


def _jdbc(request: Any) -> Target:
    """A PostgreSQL table, read with psycopg (not the sink's code)."""
    server, database = (request.getfixturevalue(f) for f in ("postgres", "pg_database"))
    cfg = {"type": "jdbc", "url": server.jdbc_url(database), "table": "out", "create_table": True}
    cfg |= {"user": server.user, "password": server.password}

    def read() -> list[str]:
        with server.connect(database) as conn:
            return [json.dumps({"id": r[0]}) for r in conn.execute("SELECT id FROM out").fetchall()]

    return Target(cfg, read)


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


def config(target: Target, **options: Any) -> Any:
    """The sink's validated config, as a job holds it."""
    job = {"name": "t", "sources": [{"type": "fake", "name": "s", "path": "unused"}], "schema": "a INT"}
    job |= {"sinks": [{**target.config, "name": "out", **options}], "checkpoint": "c"}
    job |= {"state": {"path": "s"}, "staging": {"dir": "d"}}
    if options.get("on_bad_record") == "dead_letter":
        job["dead_letter"] = {"path": "dl"}
    return parse_config(job).sinks[0]


def build(target: Target, **options: Any) -> Sink:
    return build_sink(config(target, **options))


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
    declared = config(target)
    sink = build_sink(declared)
    df = frame(spark, 5)
    assert sink.write(df, 4).written == 5
    again = sink.write(df, 4).written  # Spark replays batch 4 after a crash
    assert again == (0 if declared.delivery.skips_replayed_batch else 5)  # Delta: the table has it
    held = ids(target.read())
    if declared.guarantee != "at_least_once" or target.idempotent:
        assert held == list(
            range(5)
        )  # idempotent: the batch overwritten, or the copies dropped by FIFO dedup
    else:
        assert held == sorted([*range(5), *range(5)])  # at-least-once: a second copy of each


def test_the_suite_runs_every_registered_sink_and_the_example_plugins():
    """Each sink type the registry holds is in the suite (the target fixture says how to read it)."""
    assert {type_name(m) for m in registry.connectors("sinks")} | {"jsonl"} <= set(KINDS)
