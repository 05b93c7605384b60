"""Claim-check in the SQS and MNS sinks: payloads to moto's S3, pointers AWS's Extended Client reads."""

from __future__ import annotations

import base64
import uuid

import pytest

from ingest.connector.claim_check import parse_pointer, payload_key, pointer_body
from ingest.errors import FatalError
from sinks.mns.sink import MnsPartitionWriter
from sinks.sqs.sink import SqsPartitionWriter, dedup_id
from tests.support import extended_client, mns_server
from tests.support.polling import wait_for
from tests.support.sqs_server import FaultProxy, object_keys, sink_cfg

pytestmark = pytest.mark.integration

MIB = 1024**2
POINTER_HEAD = '["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"'


def big(tag: str, size: int) -> str:
    """A body of about ``size`` UTF-8 bytes, mostly two-byte characters (bytes ≠ characters)."""
    return tag + "é" * ((size - len(tag)) // 2)


def sample() -> list[dict]:
    return [
        {"body": "small one", "source_id": "m-small"},
        {"body": big("two-mib:", 2 * MIB), "source_id": "m-2mib"},
        {"body": big("ten-mib:", 10 * MIB), "source_id": "m-10mib"},
    ]


def sqs_writer(url: str, endpoint: str, bucket: str, moto_url: str, **claim) -> SqsPartitionWriter:
    claim_check = {"bucket": bucket, "endpoint_url": moto_url} | claim
    return SqsPartitionWriter(sink_cfg(url, endpoint, claim_check=claim_check))


def receive_all(sqs, url: str, expect: int) -> list[dict]:
    """Receive and delete ``expect`` messages (with message and system attributes), polling."""
    got: list[dict] = []

    def more() -> bool:
        ask = {"MaxNumberOfMessages": 10, "WaitTimeSeconds": 0, "MessageAttributeNames": ["All"]}
        msgs = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"], **ask)
        for m in msgs.get("Messages", []):
            got.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return len(got) >= expect

    wait_for(more, 30, f"{expect} messages on {url}", every=0.1)
    return got


def queue_depth(sqs, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


def test_large_records_are_sent_as_extended_client_pointers(sqs, s3, make_queue, bucket, moto_url):
    url, data = make_queue(), sample()
    assert sqs_writer(url, moto_url, bucket, moto_url).write(data) == (3, [])
    by_body = {m["Body"]: m for m in receive_all(sqs, url, 3)}
    assert len(by_body) == 3 and "small one" in by_body
    assert "MessageAttributes" not in by_body["small one"]
    for row in data[1:]:
        raw = row["body"].encode()
        key = payload_key("", row["source_id"], raw)
        body = pointer_body(bucket, key)
        assert body == f'{POINTER_HEAD}{bucket}","s3Key":"{key}"}}]'  # byte for byte the Java/Python format
        assert by_body[body]["MessageAttributes"] == {
            "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(raw))}
        }
        assert len(raw) != len(row["body"])  # the size is in bytes, not characters
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == raw
    assert object_keys(s3, bucket) == {parse_pointer(b)[1] for b in by_body if b != "small one"}


def test_aws_extended_client_reads_back_what_the_sink_wrote(make_queue, bucket, moto_url):
    url, data = make_queue(), sample()
    assert sqs_writer(url, moto_url, bucket, moto_url).write(data) == (3, [])
    got = extended_client.receive(moto_url, url, bucket, expect=3, timeout=60)
    assert sorted(m["body"] for m in got) == sorted(r["body"] for r in data)


def test_replayed_write_puts_the_same_keys_leaving_no_orphans(sqs, s3, make_queue, bucket, moto_url):
    url, data = make_queue(), sample()
    assert sqs_writer(url, moto_url, bucket, moto_url, key_prefix="out/").write(data) == (3, [])
    first = object_keys(s3, bucket)
    assert sqs_writer(url, moto_url, bucket, moto_url, key_prefix="out/").write(data) == (3, [])
    assert object_keys(s3, bucket) == first and len(first) == 2
    assert all(k.startswith(("out/m-2mib/", "out/m-10mib/")) for k in first)
    pointers = [m["Body"] for m in receive_all(sqs, url, 6) if m["Body"] != "small one"]
    assert len(pointers) == 4 and {parse_pointer(p)[1] for p in pointers} == first  # standard: sent twice


@pytest.mark.parametrize(
    ("claim", "offloaded"),
    [
        ({"threshold": "always"}, {"tiny", "mid", "large"}),
        ({"threshold": 1000}, {"large"}),  # over 1000 bytes (body plus attributes) only
        ({}, set()),  # default: the queue's maximum message size (256 KiB here)
    ],
)
def test_threshold_always_or_bytes(claim, offloaded, sqs, s3, make_queue, bucket, moto_url):
    url = make_queue()
    data = [
        {"body": "x", "source_id": "tiny"},
        {"body": "y" * 1000, "source_id": "mid"},
        {"body": "z" * 1001, "source_id": "large"},
    ]
    assert sqs_writer(url, moto_url, bucket, moto_url, **claim).write(data) == (3, [])
    msgs = receive_all(sqs, url, 3)
    pointed = {parse_pointer(m["Body"])[1].split("/")[0] for m in msgs if "MessageAttributes" in m}
    assert pointed == offloaded
    assert {m["Body"] for m in msgs if "MessageAttributes" not in m} == {
        r["body"] for r in data if r["source_id"] not in offloaded
    }
    assert {k.split("/")[0] for k in object_keys(s3, bucket)} == offloaded


def test_fifo_replay_is_dropped_by_dedup_and_pointers_are_used(sqs, s3, make_queue, bucket, moto_url):
    url, data = make_queue(fifo=True), sample()
    with FaultProxy(moto_url) as proxy:
        for _ in range(2):
            assert sqs_writer(url, proxy.url, bucket, moto_url).write(data) == (3, [])
        sent = [e for call in proxy.actions("SendMessageBatch") for e in call["Entries"]]
    # The dedup ids are those of the original bodies, so both writes send the same ids.
    want = [dedup_id(r["source_id"], r["body"]) for r in data] * 2
    assert [e["MessageDeduplicationId"] for e in sent] == want
    msgs = receive_all(sqs, url, 3)
    assert len(msgs) == 3 and queue_depth(sqs, url) == 0  # each once: SQS dropped the replay
    assert msgs[0]["Body"] == "small one"  # in order: one group
    assert all(m["Body"].startswith(POINTER_HEAD) for m in msgs[1:])
    assert len(object_keys(s3, bucket)) == 2


def test_missing_bucket_fails_the_write_naming_bucket_and_key_and_sends_nothing(make_queue, sqs, moto_url):
    url, data, missing = make_queue(), sample(), f"no-such-{uuid.uuid4().hex[:8]}"
    key = payload_key("", "m-2mib", data[1]["body"].encode())
    with FaultProxy(moto_url) as proxy:
        with pytest.raises(FatalError) as failed:
            sqs_writer(url, proxy.url, missing, moto_url).write(data)
        assert proxy.actions("SendMessageBatch") == []
    message = str(failed.value)
    assert missing in message and "NoSuchBucket" in message
    assert key in message or payload_key("", "m-10mib", data[2]["body"].encode()) in message
    assert queue_depth(sqs, url) == 0


def mns_writer(mns, queue: str, bucket: str, moto_url: str, **options) -> MnsPartitionWriter:
    claim_check = {"bucket": bucket, "endpoint_url": moto_url}
    return MnsPartitionWriter(mns_server.sink_cfg(mns.url, queue, claim_check=claim_check, **options))


@pytest.mark.parametrize("base64_body", [True, False])
def test_mns_large_body_goes_through_the_bucket(base64_body, mns, s3, bucket, moto_url):
    queue = mns_server.create_queue(mns.url)
    data = [
        {"body": "small mns body", "source_id": "s-1"},
        {"body": big("mns:", 200_000), "source_id": "s-200k"},
    ]
    w = mns_writer(mns, queue, bucket, moto_url, base64_body=base64_body)
    assert w.write(data) == (2, [])
    first = object_keys(s3, bucket)
    assert mns_writer(mns, queue, bucket, moto_url, base64_body=base64_body).write(data) == (2, [])
    assert object_keys(s3, bucket) == first  # replay: the same key, no orphan
    raw = [m.message_body for m in mns_server.drain(mns.url, queue, raw=True)]
    bodies = sorted(base64.b64decode(b).decode() if base64_body else b for b in raw)
    key = payload_key("", "s-200k", data[1]["body"].encode())
    assert bodies == [pointer_body(bucket, key)] * 2 + ["small mns body"] * 2
    assert first == {key}
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data[1]["body"].encode()


def test_queue_and_bucket_calls_go_through_the_sinks_http_proxy(sqs, s3, make_queue, bucket, moto_url):
    from tests.support.http_proxy import ForwardProxy

    url = make_queue()
    with ForwardProxy() as proxy:
        proxied = {"proxy_url": proxy.url, "proxy_user": "u@x", "proxy_password": "pw:s3cret-1"}
        claim_check = {"bucket": bucket, "endpoint_url": moto_url}
        writer = SqsPartitionWriter(sink_cfg(url, moto_url, claim_check=claim_check, **proxied))
        assert writer.write(sample()[:2]) == (2, [])
    key = payload_key("", "m-2mib", sample()[1]["body"].encode())
    auth = "Basic " + base64.b64encode(b"u@x:pw:s3cret-1").decode()
    puts = [(path, a) for method, path, a in proxy.calls if method == "PUT"]
    assert puts == [(f"{moto_url}/{bucket}/{key}", auth)]  # the payload, through the proxy
    assert all(a == auth for _, _, a in proxy.calls) and any(m == "POST" for m, _, _ in proxy.calls)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == sample()[1]["body"].encode()
    assert len(receive_all(sqs, url, 2)) == 2
