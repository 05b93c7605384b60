"""The endless SQS and MNS endpoints of ``make bench-intake`` speak what boto3 and aliyun-mns-sdk speak."""

from __future__ import annotations

import base64
import hashlib

import boto3
import orjson
import pytest

from bench.endless import endpoint, node
from sources.mns.client import PROBE_HANDLE

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(node() is None, reason="node is not on PATH: the endless endpoints are Node scripts"),
]


def test_sqs_endpoint_through_boto3():
    with endpoint("sqs") as ep:
        sqs = boto3.client(
            "sqs",
            endpoint_url=ep.url,
            region_name="us-east-1",
            aws_access_key_id="a",
            aws_secret_access_key="b",
        )
        url = sqs.get_queue_url(QueueName="endless")["QueueUrl"]
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
        assert len(msgs) == 10 and len({m["MessageId"] for m in msgs}) == 10
        # botocore parses MD5OfBody but does not check it (the Java SDK does): check it here.
        assert all(hashlib.md5(m["Body"].encode()).hexdigest() == m["MD5OfBody"] for m in msgs)
        assert {"SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"} <= set(
            msgs[0]["Attributes"]
        )
        assert orjson.loads(msgs[3]["Body"])["event_id"] == 3
        entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
        hidden = sqs.change_message_visibility_batch(
            QueueUrl=url, Entries=[e | {"VisibilityTimeout": 60} for e in entries[:4]]
        )
        assert len(hidden["Successful"]) == 4 and not hidden["Failed"]
        assert len(sqs.delete_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 10
        with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
            sqs.delete_message(QueueUrl=url, ReceiptHandle="mq-ingest-delete-permission-probe")
        stats = ep.stats()
    assert (stats["received"], stats["deleted"], stats["visibility_changes"]) == (10, 10, 4)
    assert stats["calls"]["ReceiveMessage"] == 1 and stats["cpu_us_per_message"] > 0


def test_mns_endpoint_through_the_sdk():
    from mns.account import Account
    from mns.mns_exception import MNSServerException

    with endpoint("mns", max_messages=20) as ep:
        queue = Account(ep.url, "id", "secret").get_queue("endless")
        queue.set_encoding(False)
        msgs = queue.batch_receive_message(16, 1)
        assert len(msgs) == 16 and len({m.message_id for m in msgs}) == 16
        assert all(
            hashlib.md5(m.message_body.encode()).hexdigest().upper() == m.message_body_md5 for m in msgs
        )
        assert orjson.loads(base64.b64decode(msgs[5].message_body))["event_id"] == 5
        renewed = queue.change_message_visibility(msgs[0].receipt_handle, 60)
        assert renewed.receipt_handle != msgs[0].receipt_handle
        queue.batch_delete_message([renewed.receipt_handle] + [m.receipt_handle for m in msgs[1:]])
        with pytest.raises(MNSServerException) as err:
            queue.batch_delete_message([PROBE_HANDLE])
        assert err.value.type == "ReceiptHandleError"
        assert len(queue.batch_receive_message(16, 0)) == 4  # --max-messages: then none
        with pytest.raises(MNSServerException) as err:
            queue.batch_receive_message(16, 0)
        assert err.value.type == "MessageNotExist"
        stats = ep.stats()
    assert (stats["received"], stats["deleted"], stats["visibility_changes"]) == (20, 16, 1)
    assert stats["calls"]["BatchReceiveMessage"] == 3


def test_sigterm_prints_the_counts():
    with endpoint("sqs") as ep:
        pass
    assert ep.final is not None and ep.final["received"] == 0 and ep.proc.returncode == 0
