"""SQS source and sink against moto's server mode on 127.0.0.1 through boto3."""

from __future__ import annotations

import pytest

from ingest.config.sinks import SqsSinkConfig
from ingest.config.sources import SqsSourceConfig
from ingest.errors import FatalError
from sinks.sqs import SqsPartitionWriter
from sources.sqs import SqsSource
from tests.contract.suite import receive_n

pytestmark = pytest.mark.integration


def source(url, moto_url, **kw):
    cfg = {
        "type": "sqs",
        "name": "s",
        "sqs.url": url,
        "sqs.endpoint.url": moto_url,
        "sqs.waittime.seconds": 1,
    }
    return SqsSource(SqsSourceConfig.model_validate(cfg | kw))


def writer(url, moto_url, **kw):
    cfg = {"type": "sqs", "name": "out", "sqsUrl": url, "endpoint_url": moto_url} | kw
    return SqsPartitionWriter(SqsSinkConfig.model_validate(cfg))


def drain(sqs, url, n_max=1000):
    bodies = []
    while True:
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        if not msgs:
            return bodies
        bodies += [m["Body"] for m in msgs]
        for m in msgs:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_every_attribute_reaches_the_message(sqs, make_queue, moto_url):
    url = make_queue()
    sqs.send_message(
        QueueUrl=url,
        MessageBody="hello",
        MessageAttributes={
            "s": {"DataType": "String", "StringValue": "text"},
            "n": {"DataType": "Number", "StringValue": "42"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
    )
    m = receive_n(source(url, moto_url), 1)[0]
    assert m.body == "hello" and m.md5 == "5d41402abc4b2a76b9719d911017c592"
    assert m.message_attributes == {"s": "text", "n": "42", "b": "AAE="}
    for key in ("SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp", "SenderId"):
        assert key in m.attributes
    assert m.sent_ts and m.first_receive_ts and m.receive_count == 1 and m.sender_id


def test_fifo_fields_and_attempt_id(sqs, make_queue, moto_url):
    url = make_queue(fifo=True)
    for i in range(3):
        sqs.send_message(
            QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}"
        )
    msgs = receive_n(source(url, moto_url), 3)
    assert msgs[0].group_id == "g" and msgs[0].dedup_id == "d0" and msgs[0].sequence_number
    assert [m.body for m in msgs] == ["m0", "m1", "m2"]


def test_ack_more_than_ten_with_a_repeated_handle(sqs, make_queue, moto_url):
    url = make_queue()
    for i in range(0, 23, 10):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(k), "MessageBody": f"{k}"} for k in range(i, min(23, i + 10))]
        )
    src = source(url, moto_url, visibility_timeout=30)
    msgs = receive_n(src, 23)
    handles = [m.receipt_handle for m in msgs]
    res = src.ack(handles + handles[:3])
    assert len(res.deleted) == 23 and not res.failed
    assert drain(sqs, url) == []


def test_missing_queue_is_fatal_names_queue_not_secret(moto_url):
    url = moto_url + "/123456789012/does-not-exist"
    src = source(
        url,
        moto_url,
        **{
            "sqs.credentials.provider": "static",
            "aws.access.key.id": "AKIDEXAMPLE",
            "aws.secret.access.key": "SUPER-SECRET-VALUE-1",
        },
    )
    with pytest.raises(FatalError) as err:
        src.receive(1, 1)
    assert "does-not-exist" in str(err.value)
    assert "NonExistentQueue" in str(err.value) or "QueueDoesNotExist" in str(err.value)
    assert "SUPER-SECRET-VALUE-1" not in str(err.value)


def rows(n, start=0, size=10):
    return [{"body": f"{i:0{size}d}", "source_id": f"src-{i}"} for i in range(start, start + n)]


def test_writer_sends_all_in_batches(sqs, make_queue, moto_url):
    url = make_queue()
    sent, rejected = writer(url, moto_url).write(rows(25))
    assert (sent, rejected) == (25, [])
    assert sorted(drain(sqs, url)) == sorted(r["body"] for r in rows(25))


def test_oversized_record_follows_policy(sqs, make_queue, moto_url):
    url = make_queue(MaximumMessageSize="1024")
    data = [*rows(3), {"body": "x" * 2000, "source_id": "big-one"}]
    sent, rejected = writer(url, moto_url, on_bad_record="skip").write(data)
    assert sent == 3 and [r["source_id"] for r in rejected] == ["big-one"]
    assert "over maxRecordSizeInBytes 1024" in rejected[0]["error"]
    with pytest.raises(FatalError, match="big-one"):
        writer(url, moto_url, on_bad_record="fail").write(data)
    assert len(drain(sqs, url)) == 3


def test_fifo_target_dedups_a_replayed_batch(sqs, make_queue, moto_url):
    url = make_queue(fifo=True)
    data = [{"body": f"b{i}", "source_id": f"s{i}", "group_id": "g1", "arrival": i} for i in range(12)]
    w = writer(url, moto_url)
    assert w.write(data)[0] == 12
    assert w.write(data)[0] == 12  # accepted by SQS, dropped as duplicates
    assert drain(sqs, url) == [f"b{i}" for i in range(12)]


def test_source_and_writer_ride_out_throttling_and_dropped_connections(sqs, make_queue, moto_url):
    from tests.integration.fault_proxy import FaultProxy

    src_q, dst_q = make_queue(), make_queue()
    sqs.send_message_batch(
        QueueUrl=src_q, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    )
    with FaultProxy(moto_url, fail=6) as proxy:
        src = source(src_q, moto_url, **{"sqs.endpoint.url": proxy.url, "sqs.max.retries": 8})
        msgs = receive_n(src, 10)
        res = src.ack([m.receipt_handle for m in msgs])
        assert len(res.deleted) == 10 and not res.failed
        proxy.remaining = 4
        sent, rejected = writer(
            dst_q, proxy.url, max_retries=8, maxRecordSizeInBytes=4096, maxBatchSizeInBytes=40960
        ).write(rows(15))
        assert proxy.failed == 10
    assert sorted(m.body for m in msgs) == sorted(f"m{i}" for i in range(10))
    assert (sent, rejected) == (15, [])
    assert drain(sqs, src_q) == []
    assert sorted(drain(sqs, dst_q)) == sorted(r["body"] for r in rows(15))
