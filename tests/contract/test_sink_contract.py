"""The sink contract every sink passes (``sinks.base.Sink``): a ``WriteReport`` with the rows the
target took and the records it refused by policy, and a replayed batch as each sink promises.

Each sink writes to its real target on 127.0.0.1: files, stdout, the fake queue, SQS on moto,
MNS on the emulator, RocketMQ on both transports (the remoting and gRPC emulators), a Delta table
on disk, a PostgreSQL table, all through the clients a user runs; and the example plugin's sink
(``tests/plugins/mq_ingest_example``), registered in code. The sinks are the registry's: what each
promises (records it refuses, a replayed batch) is its declaration (``SinkDelivery``); how to set up
and read each one's target is its own module, ``tests/contract/sink_targets/<type>.py``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ingest.config import parse_config, registry
from ingest.config.connector import type_name
from ingest.config.registry import build_sink
from ingest.connector import Sink, WriteReport
from ingest.errors import FatalError
from tests.support import plugins
from tests.support.sink_contract import Target, targets

pytestmark = [pytest.mark.spark, pytest.mark.integration]
SINKS = {type_name(m): m for m in [*registry.connectors("sinks"), *plugins.configs()["sinks"]]}
"""Every sink type: the registry's (built-ins and installed plugins) and the example plugin's."""
TARGETS = targets(list(SINKS))
"""Each target the suite writes to → (its sink type, its factory), from each type's own module: a
second target of a type is a FIFO queue, RocketMQ's other transport."""
KINDS = list(TARGETS)
REFUSING = [k for k in KINDS if SINKS[TARGETS[k][0]].delivery.refuses_records]  # type: ignore[attr-defined]
"""Sinks that declare they refuse records (a size limit), so a record they refuse for good can be made."""


@pytest.fixture
def target(request, tmp_path) -> Iterator[Target]:
    _, factory = TARGETS[request.param]
    yield from factory(request, tmp_path)


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
    """Each sink type the registry holds is in the suite (its module in ``tests/contract/sink_targets``
    says how to set up and read its target)."""
    covered = {kind for kind, _ in TARGETS.values()}
    missing = sorted(({type_name(m) for m in registry.connectors("sinks")} | {"jsonl"}) - covered)
    assert not missing, f"no target for the sink types {missing}: add tests/contract/sink_targets/<type>.py"
