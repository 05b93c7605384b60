"""SqsSink and its partition writer against moto on 127.0.0.1, partial failures injected by a proxy."""

from __future__ import annotations

import time

import orjson
import pytest

from ingest.connector import WriteReport
from ingest.errors import FatalError, TransientError
from sinks.sqs.sink import SqsPartitionWriter, SqsSink, dedup_id
from sources.sqs.source import SqsSource
from tests.support.sqs_server import FaultProxy, drain, send_bodies, sink_cfg, source_cfg

pytestmark = pytest.mark.integration


def rows(n: int, start: int = 0) -> list[dict]:
    return [{"body": f"body-{i:05d}", "source_id": f"src-{i}"} for i in range(start, start + n)]


def writer(url: str, endpoint: str, **options) -> SqsPartitionWriter:
    return SqsPartitionWriter(sink_cfg(url, endpoint, **options))


def bodies(call: dict) -> list[str]:
    return [e["MessageBody"] for e in call["Entries"]]


@pytest.mark.parametrize(("byte_limit", "per_call"), [(None, 10), (35, 3)])
def test_writer_sends_in_batches_within_count_and_byte_limits(
    byte_limit, per_call, sqs, make_queue, moto_url
):
    url = make_queue()
    with FaultProxy(moto_url) as proxy:
        options = {"maxBatchSizeInBytes": byte_limit} if byte_limit else {}
        assert writer(url, proxy.url, **options).write(rows(25)) == (25, [])
        calls = proxy.actions("SendMessageBatch")
    assert max(len(c["Entries"]) for c in calls) == per_call
    assert sum(len(c["Entries"]) for c in calls) == 25
    assert sorted(drain(sqs, url)) == [r["body"] for r in rows(25)]


def test_partial_failure_resends_only_the_failed_entries(sqs, make_queue, moto_url):
    url = make_queue()
    with FaultProxy(moto_url, faults=["pass", "fail_entries"]) as proxy:  # "pass": GetQueueAttributes
        assert writer(url, proxy.url, maxInFlightRequests=1).write(rows(25)) == (25, [])
        calls = [bodies(c) for c in proxy.actions("SendMessageBatch")]
    sent = [r["body"] for r in rows(25)]
    assert calls == [sent[:10], sent[1:10:2], sent[10:20], sent[20:]]
    assert sorted(drain(sqs, url)) == sent  # each exactly once


def test_entry_failures_after_retries_or_with_fail_on_error_raise(make_queue, moto_url):
    url = make_queue()
    with FaultProxy(moto_url, faults=["pass", "fail_entries"]) as proxy:
        with pytest.raises(FatalError, match="failOnError is true"):
            writer(url, proxy.url, failOnError=True).write(rows(4))
        assert len(proxy.actions("SendMessageBatch")) == 1
        proxy.faults = ["fail_entries"] * 2
        with pytest.raises(TransientError, match=r"1 entries failed \(source ids src-3"):
            writer(url, proxy.url, max_retries=1).write(rows(4))
        assert len(proxy.actions("SendMessageBatch")) == 3


def test_oversized_record_under_each_policy(sqs, make_queue, moto_url):
    url = make_queue(MaximumMessageSize="1024")
    data = [*rows(2), {"body": "x" * 1500, "source_id": "big-one"}, *rows(1, start=2)]
    sent, rejected = writer(url, moto_url, on_bad_record="skip").write(data)
    assert sent == 3 and rejected == [
        {
            "sink": "out",
            "source_id": "big-one",
            "error": "1500 bytes, over maxRecordSizeInBytes 1024",
            "action": "skip",
        }
    ]
    sent, rejected = writer(url, moto_url, on_bad_record="dead_letter").write(data)
    assert sent == 3 and [(r["source_id"], r["action"], len(r["body"])) for r in rejected] == [
        ("big-one", "dead_letter", 1500)
    ]
    assert len(drain(sqs, url)) == 6
    with pytest.raises(FatalError, match=r"big-one.*on_bad_record is fail"):
        writer(url, moto_url, on_bad_record="fail").write(data)


def test_a_batch_refused_whole_is_resent_entry_by_entry(sqs, make_queue, moto_url):
    """Limits set above the queue's own: moto refuses the whole batch (InvalidParameterValue)."""
    url = make_queue(MaximumMessageSize="1024")
    data = [*rows(2), {"body": "y" * 1500, "source_id": "too-big"}, *rows(2, start=2)]
    w = writer(url, moto_url, on_bad_record="skip", maxRecordSizeInBytes=4096, maxBatchSizeInBytes=65536)
    sent, rejected = w.write(data)
    assert sent == 4 and [r["source_id"] for r in rejected] == ["too-big"]
    assert "InvalidParameterValue" in rejected[0]["error"]
    assert sorted(drain(sqs, url)) == [r["body"] for r in rows(4)]


def test_entry_refused_with_sender_fault_follows_policy(sqs, make_queue, moto_url):
    url = make_queue()
    data = [*rows(3), {"body": "POISON", "source_id": "poison-1"}]
    with FaultProxy(moto_url) as proxy:
        proxy.refuse_marker = "POISON"
        sent, rejected = writer(url, proxy.url, on_bad_record="skip").write(data)
        assert sent == 3 and [r["source_id"] for r in rejected] == ["poison-1"]
        assert "InvalidMessageContents" in rejected[0]["error"]
        with pytest.raises(FatalError, match="poison-1"):
            writer(url, proxy.url).write(data)
    assert len(drain(sqs, url)) >= 3


def test_fifo_target_gets_group_and_dedup_ids_and_drops_a_replay(sqs, make_queue, moto_url):
    url = make_queue(fifo=True)
    data = [{**r, "group_id": f"g{i % 2}"} for i, r in enumerate(rows(12))]
    w = writer(url, moto_url)
    assert w.write(data) == (12, [])
    assert w.write(data) == (12, [])  # a replayed batch: accepted, and dropped by SQS as duplicates
    got = drain(sqs, url, attributes=True)
    assert sorted(m["Body"] for m in got) == [r["body"] for r in data]
    for m, r in zip(sorted(got, key=lambda m: m["Body"]), data, strict=True):
        assert m["Attributes"]["MessageGroupId"] == r["group_id"]
        assert m["Attributes"]["MessageDeduplicationId"] == dedup_id(r["source_id"], r["body"])


def test_max_time_in_buffer_flushes_while_the_rows_wait(sqs, make_queue, moto_url):
    url = make_queue()
    flushed = []

    def slow_rows(proxy: FaultProxy):
        yield from rows(3)
        flushed.append(proxy.sent_batch.wait(timeout=30))  # upstream still computing
        yield from rows(1, start=3)

    with FaultProxy(moto_url) as proxy:
        assert writer(url, proxy.url, maxTimeInBufferMS=50).write(slow_rows(proxy)) == (4, [])
        calls = [bodies(c) for c in proxy.actions("SendMessageBatch")]
    assert flushed == [True] and calls[0] == [r["body"] for r in rows(3)]
    assert len(drain(sqs, url)) == 4


@pytest.mark.spark
def test_sink_writes_a_dataframe_standard_and_fifo(spark, sqs, make_queue, moto_url):
    schema = (
        "event_id BIGINT, name STRING, _meta STRUCT<message_id: STRING, group_id: STRING, arrival: BIGINT>"
    )
    data = [(i, f"n{i}", (f"m-{i}", f"g{i % 2}", i)) for i in range(6)]
    df = spark.createDataFrame(data, schema)
    expected = sorted(orjson.dumps({"event_id": i, "name": f"n{i}"}).decode() for i in range(6))
    std, fifo = make_queue(), make_queue(fifo=True)
    sink = SqsSink(sink_cfg(std, moto_url, attribute_columns=["name"]))
    assert sink.write(df, 0) == WriteReport(6, [])
    got = sqs.receive_message(QueueUrl=std, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert {m["MessageAttributes"]["name"]["StringValue"] for m in got} <= {f"n{i}" for i in range(6)}
    assert sorted(drain(sqs, std) + [m["Body"] for m in got]) == expected
    fifo_sink = SqsSink(sink_cfg(fifo, moto_url))
    assert fifo_sink.write(df, 1).written == 6 and fifo_sink.write(df, 1).written == 6  # replayed batch
    got = drain(sqs, fifo, attributes=True)
    assert sorted(m["Body"] for m in got) == expected
    for m in got:
        assert m["Attributes"]["MessageGroupId"] == f"g{orjson.loads(m['Body'])['event_id'] % 2}"


def test_source_and_writer_ride_out_throttling_5xx_and_dropped_connections(sqs, make_queue, moto_url):
    src_q, dst_q, fifo_q = make_queue(), make_queue(), make_queue(fifo=True)
    expected = [f"m{i}" for i in range(30)]
    send_bodies(sqs, src_q, expected)
    seen: dict[str, str] = {}
    faults = ["throttle", "503", "pass", "drop", "500", "pass", "drop_after", "pass"] * 3
    with FaultProxy(moto_url, faults=faults) as proxy:
        src = SqsSource(source_cfg(src_q, proxy.url, visibility_timeout=2, **{"sqs.max.retries": 8}))
        deadline = time.monotonic() + 60
        # Keep polling (empty receives included) until every fault has been met: moto may
        # hand out all 30 messages in fewer calls than there are faults.
        while (len(seen) < 30 or proxy.faults) and time.monotonic() < deadline:
            got = src.receive(10, 1)
            res = src.ack([m.receipt_handle for m in got])
            seen |= {m.message_id: m.body for m in got if m.receipt_handle in res.deleted}
        assert not proxy.faults  # every fault was met
        proxy.faults = ["throttle", "503", "drop", "pass", "500", "fail_entries"] * 2
        assert writer(dst_q, proxy.url, max_retries=8).write(rows(25)) == (25, [])
        proxy.faults = ["drop_after", "throttle", "pass", "drop_after", "fail_entries", "pass"] * 2
        fifo_rows = [{**r, "group_id": "g"} for r in rows(25)]
        assert writer(fifo_q, proxy.url, max_retries=8).write(fifo_rows) == (25, [])
    assert sorted(seen.values()) == sorted(expected)
    assert drain(sqs, src_q) == []
    assert sorted(drain(sqs, dst_q)) == [r["body"] for r in rows(25)]
    assert drain(sqs, fifo_q) == [r["body"] for r in rows(25)]  # resent after lost replies: deduplicated


def test_writer_and_source_pickle_once_their_clients_exist(sqs, make_queue, moto_url):
    import pickle

    url = make_queue()
    w, src = writer(url, moto_url), SqsSource(source_cfg(url, moto_url))
    assert w.write(rows(1)) == (1, []) and len(src.receive(10, 1)) == 1  # both hold clients now
    assert pickle.loads(pickle.dumps(w)).write(rows(1, start=1)) == (1, [])
    assert pickle.loads(pickle.dumps(src)).receive(10, 1)[0].body == rows(1, start=1)[0]["body"]


def test_a_body_with_a_character_sqs_forbids_is_refused_before_sending(sqs, make_queue, moto_url):
    url = make_queue()
    data = [*rows(2), {"body": "ctrl-\x01-char", "source_id": "ctrl-1"}]
    with FaultProxy(moto_url) as proxy:
        sent, rejected = writer(url, proxy.url, on_bad_record="skip").write(data)
        assert sent == 2 and [r["source_id"] for r in rejected] == ["ctrl-1"]
        assert rejected[0]["error"] == "body has character U+0001 at 5, which SQS does not allow"
        assert all("\x01" not in b for call in proxy.actions("SendMessageBatch") for b in bodies(call))
    assert sorted(drain(sqs, url)) == [r["body"] for r in rows(2)]


def test_a_final_entry_code_is_not_retried_whatever_sender_fault_says():
    """LocalStack answers ReceiptHandleIsInvalid and InvalidMessageContents with SenderFault false."""
    from sources.sqs.errors import entry_is_final

    assert entry_is_final({"Code": "ReceiptHandleIsInvalid", "SenderFault": False})
    assert entry_is_final({"Code": "AWS.SimpleQueueService.InvalidMessageContents", "SenderFault": False})
    assert entry_is_final({"Code": "InternalError", "SenderFault": True})
    assert not entry_is_final({"Code": "InternalError", "SenderFault": False})
    assert not entry_is_final({"Code": "ServiceUnavailable"})


@pytest.mark.parametrize("client", ["crt", "boto3"])
def test_source_attributes_are_forwarded_with_their_types_within_the_cap(
    client, spark, sqs, make_queue, moto_url
):
    """``forward_attributes``: a source message's attributes go out typed as they came in (a
    source → sink round trip through moto, awscrt or boto3 on both ends), minus excluded
    prefixes, at most 10 in all."""
    src, dst = make_queue(), make_queue()
    attrs = {
        "a-num": {"DataType": "Number", "StringValue": "-4.5"},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
        "c": {"DataType": "String.custom", "StringValue": "x"},
        "internal-trace": {"DataType": "String", "StringValue": "t"},
    }
    attrs |= {f"k{i}": {"DataType": "String", "StringValue": str(i)} for i in range(6)}  # 10: SQS's most
    sqs.send_message(QueueUrl=src, MessageBody="with attributes", MessageAttributes=attrs)
    got = SqsSource(source_cfg(src, moto_url, **{"sqs.client": client})).receive(1, 1)[0]
    meta = {
        "message_id": got.message_id,
        "message_attributes": got.message_attributes,
        "message_attribute_types": got.message_attribute_types,
    }
    schema = "v STRING, tag STRING, tag2 STRING, _meta STRUCT<message_id: STRING, "
    schema += "message_attributes: MAP<STRING, STRING>, message_attribute_types: MAP<STRING, STRING>>"
    df = spark.createDataFrame([("payload", "red", "blue", meta)], schema)
    options = {
        "body_column": "v",
        "attribute_columns": ["tag", "tag2"],
        "forward_attributes": True,
        "forward_exclude_prefixes": ["internal-"],
        "client": client,
    }
    assert SqsSink(sink_cfg(dst, moto_url, **options)).write(df, 0) == WriteReport(1, [])
    (out,) = sqs.receive_message(QueueUrl=dst, MessageAttributeNames=["All"])["Messages"]
    sent = out["MessageAttributes"]
    assert sent["tag"] == {"DataType": "String", "StringValue": "red"}
    assert sent["a-num"] == {"DataType": "Number", "StringValue": "-4.5"}
    assert sent["b"] == {"DataType": "Binary", "BinaryValue": b"\x00\xff"}
    assert sent["c"] == {"DataType": "String.custom", "StringValue": "x"}
    # Two columns, then the source's in name order without the excluded one, cut at 10: k5 is left out.
    assert sorted(sent) == sorted(["tag", "tag2", "a-num", "b", "c", "k0", "k1", "k2", "k3", "k4"])


def test_a_row_delay_column_and_the_backoff_settings(sqs, make_queue, moto_url):
    url = make_queue()
    with FaultProxy(moto_url) as proxy:
        w = writer(url, proxy.url, delay_column="d")
        assert w.write([{"body": "later", "source_id": "s1", "delay": 30}, *rows(1)]) == (2, [])
        (call,) = proxy.actions("SendMessageBatch")
        assert [e.get("DelaySeconds") for e in call["Entries"]] == [30, None]
        proxy.faults = ["503"] * 50
        slow = {"max_retries": 40, "backoff.initial_interval": "50ms", "backoff.max_interval": "50ms"}
        with pytest.raises(TransientError):
            writer(url, proxy.url, **slow, **{"backoff.max_elapsed_time": "300ms"}).write(rows(1, 5))
        tries = len(proxy.actions("SendMessageBatch")) - 1
    assert 2 <= tries < 40  # max_elapsed_time ended the retries long before max_retries


def test_each_row_goes_to_its_own_queue_url(sqs, make_queue, moto_url):
    default, other, fifo = make_queue(), make_queue(), make_queue(fifo=True)
    targets = [None, other, fifo]
    data = [{"body": f"b{i}", "source_id": f"s{i}", "queue_url": targets[i % 3]} for i in range(12)]
    assert writer(default, moto_url, queue_url_column="target").write(data) == (12, [])
    assert sorted(drain(sqs, default)) == sorted(f"b{i}" for i in range(0, 12, 3))
    assert sorted(drain(sqs, other)) == sorted(f"b{i}" for i in range(1, 12, 3))
    assert sorted(drain(sqs, fifo)) == sorted(
        f"b{i}" for i in range(2, 12, 3)
    )  # group "default", dedup by id
