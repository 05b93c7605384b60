"""MnsSink and its partition writer on the emulator: batching, limits, bad-record policies, retries, Spark."""

from __future__ import annotations

import json

import pytest
from mns.mns_exception import MNSServerException

from ingest.connector import WriteReport
from ingest.errors import FatalError, TransientError
from sinks.mns.sink import MnsPartitionWriter, MnsSink
from tests.support.mns_server import account, create_queue, drain, sink_cfg

pytestmark = pytest.mark.integration


def rows(n: int, start: int = 0) -> list[dict]:
    return [{"body": f"body-{i:04d}", "source_id": f"src-{i}"} for i in range(start, start + n)]


def writer(mns, queue: str, **options) -> MnsPartitionWriter:
    return MnsPartitionWriter(sink_cfg(mns.url, queue, **options))


def test_batches_at_most_16_messages_per_call(mns):
    queue = create_queue(mns.url)
    w = writer(mns, queue)
    assert w.write(rows(40)) == (40, [])
    assert w.calls == [16, 16, 8]
    assert sorted(drain(mns.url, queue)) == [r["body"] for r in rows(40)]


def test_batches_stay_within_64_kib_as_sent(mns):
    queue = create_queue(mns.url)
    big = [{"body": c * 20_000, "source_id": c} for c in "abcde"]  # 26,668 bytes each in base64
    w = writer(mns, queue)
    assert w.write(big) == (5, [])
    assert w.calls == [2, 2, 1]
    assert sorted(drain(mns.url, queue)) == [r["body"] for r in big]


@pytest.mark.parametrize("base64_body", [True, False])
def test_over_limit_records_under_each_policy(mns, base64_body):
    queue = create_queue(mns.url)
    limit = 49152 if base64_body else 65536  # the raw size that encodes to 64 KiB
    data = [*rows(2), {"body": "x" * (limit + 1), "source_id": "big-one"}, {"body": "", "source_id": "empty"}]
    data.append({"body": "x" * limit, "source_id": "just-fits"})
    options = {"base64_body": base64_body}
    with pytest.raises(FatalError, match=r"source message big-one.*on_bad_record is fail"):
        writer(mns, queue, **options).write(data)
    sent, rejected = writer(mns, queue, on_bad_record="skip", **options).write(data)
    assert sent == 3 and [(r["source_id"], r["action"]) for r in rejected] == [
        ("big-one", "skip"),
        ("empty", "skip"),
    ]
    assert "over the 65536-byte MNS message limit" in rejected[0]["error"] and "body" not in rejected[0]
    sent, rejected = writer(mns, queue, on_bad_record="dead_letter", **options).write(data)
    assert sent == 3 and [(r["source_id"], len(r["body"])) for r in rejected] == [
        ("big-one", limit + 1),
        ("empty", 0),
    ]
    queued = drain(mns.url, queue, raw=True)
    assert len(queued) == 3 + 3  # under fail, nothing went out: rows(2) were still buffered
    assert max(len(m.message_body) for m in queued) == 65536


def test_records_the_queue_refuses_follow_the_policy(mns):
    url = mns.url
    queue = create_queue(url, maximum_message_size=1024)  # smaller than the sink's limit: MNS refuses
    data = [*rows(3), {"body": "y" * 2000, "source_id": "too-big-for-queue"}]
    sent, rejected = writer(mns, queue, on_bad_record="skip").write(data)
    assert sent == 3 and [(r["source_id"], r["error"][:15]) for r in rejected] == [
        ("too-big-for-queue", "InvalidArgument")
    ]
    assert sorted(drain(url, queue)) == [r["body"] for r in rows(3)]


def test_partial_failure_resends_only_the_failed_entries(mns):
    queue = create_queue(mns.url)
    mns.store.inject("BatchSendMessage", "InternalError", entries={1, 3})
    w = writer(mns, queue)
    assert w.write(rows(5)) == (5, [])
    assert w.calls == [5, 2]
    assert sorted(drain(mns.url, queue)) == [r["body"] for r in rows(5)]  # each exactly once


def test_entry_failures_after_retries_raise(mns):
    queue = create_queue(mns.url)
    for _ in range(2):
        mns.store.inject("BatchSendMessage", "InternalError", entries={0})
    with pytest.raises(TransientError, match=r"1 entries failed \(source ids src-0"):
        writer(mns, queue, max_retries=1).write(rows(2))
    assert drain(mns.url, queue) == ["body-0001"]


def test_priority_delay_and_raw_encoding(mns):
    queue = create_queue(mns.url)
    data = [{"body": f"p{p}", "source_id": None, "priority": p, "delay": None} for p in (9, 2, 5)]
    data += [
        {"body": "later", "source_id": None, "priority": None, "delay": 60},
        {"body": "bad", "priority": 0},
    ]
    sent, rejected = writer(mns, queue, base64_body=False, on_bad_record="skip").write(data)
    assert (sent, [r["error"] for r in rejected]) == (4, ["priority 0 is not within 1-16"])
    q = account(mns.url).get_queue(queue)
    q.set_encoding(False)
    assert [m.message_body for m in q.batch_receive_message(16, 1)] == ["p2", "p5", "p9"]  # raw, by priority
    with pytest.raises(MNSServerException, match="MessageNotExist"):
        q.batch_receive_message(16, 0)  # "later" is delayed


@pytest.mark.spark
def test_spark_write_sends_rows_without_meta(spark, mns):
    from pyspark.sql import functions as F

    queue = create_queue(mns.url)
    data = [(i, f"user-{i}", 1 + i % 16) for i in range(20)]
    df = spark.createDataFrame(data, "id INT, name STRING, prio INT")
    meta = F.struct(
        F.concat(F.lit("m-"), F.col("id").cast("string")).alias("message_id"), F.lit("q").alias("queue")
    )
    df = df.withColumn("_meta", meta).repartition(3)
    sink = MnsSink(sink_cfg(mns.url, queue, priority_column="prio"))
    assert sink.write(df, batch_id=7) == WriteReport(20, [])
    got = sorted((json.loads(b) for b in drain(mns.url, queue)), key=lambda r: r["id"])
    assert got == [{"id": i, "name": f"user-{i}", "prio": 1 + i % 16} for i in range(20)]
