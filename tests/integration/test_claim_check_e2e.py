"""Claim-check end to end on moto's S3 and SQS: what AWS's Extended Client sends, the job reads;
payloads are deleted only after their messages are acked, also under kill -9."""

from __future__ import annotations

import signal

import orjson
import pytest

from ingest.config import parse_config
from ingest.connector.claim_check import pointer_body
from ingest.pipeline import Job
from tests.support import extended_client, jobconfig
from tests.support.jobs import job_config, metric, read_jsonl_dir, run_cli, run_in_session, write_config
from tests.support.sqs_server import drain, object_keys, wait_all_visible

pytestmark = [pytest.mark.integration, pytest.mark.spark]
MIB = 1024 * 1024


def event(i: int, size: int = 0) -> str:
    """An event body whose ``action`` pads it to about ``size`` bytes."""
    pad = "x" * max(0, size - 100)
    return orjson.dumps({"event_id": i, "user_id": 1, "action": f"a{i}{pad}", "amount": 1.5}).decode()


def source(url: str, moto_url: str, **options) -> dict:
    """The SQS source reading claim-check pointers from moto's S3 and deleting them after the ack."""
    claim_check = {"endpoint_url": moto_url, "delete_payload": True}
    ours = {
        "visibility_timeout": 30,
        "receivers": 1,
        "on_bad_message": "dead_letter",
        "claim_check": claim_check,
    }
    return jobconfig.sqs_source(url, moto_url, **(ours | options))


def test_extended_client_payloads_are_read_and_deleted_after_the_ack(
    tmp_path, spark, sqs, s3, make_queue, moto_url, bucket
):
    src = make_queue()
    bodies = [event(0, 2 * MIB), event(1, 10 * MIB), event(2)]
    extended_client.send(moto_url, src, bucket, bodies)
    # The legacy attribute, and a pointer to an object that does not exist: a bad message.
    legacy_key, missing_key = "legacy-1", "gone/nowhere"
    s3.put_object(Bucket=bucket, Key=legacy_key, Body=event(3, MIB))
    for key in (legacy_key, missing_key):
        attrs = {"SQSLargePayloadSize": {"DataType": "Number", "StringValue": "1"}}
        sqs.send_message(QueueUrl=src, MessageBody=pointer_body(bucket, key), MessageAttributes=attrs)
    assert len(object_keys(s3, bucket)) == 3  # two offloaded by the Extended Client, one legacy

    # Through Spark to an SQS sink that offloads too: AWS's Extended Client reads what it sent.
    dst, out_bucket = make_queue(), f"{bucket}-out"
    s3.create_bucket(Bucket=out_bucket)
    sqs_sink = {"type": "sqs", "name": "sqs", "sqsUrl": dst, "aws.endpoint": moto_url}
    sqs_sink["claim_check"] = {"bucket": out_bucket, "endpoint_url": moto_url, "key_prefix": "out/"}
    cfg = job_config(tmp_path, dead_letter={"path": str(tmp_path / "dlq")})
    cfg["sinks"].append(sqs_sink)
    cfg["sources"] = [source(src, moto_url)]
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0  # in this test's Spark session
    # Over the queue's MaximumMessageSize (moto: 1 MiB), the 2 and 10 MiB records went through the
    # bucket under the sink's prefix; the 1 MiB one (just under) and the small one did not.
    offloaded = object_keys(s3, out_bucket)
    assert len(offloaded) == 2 and all(k.startswith("out/") for k in offloaded), offloaded
    received = extended_client.receive(moto_url, dst, out_bucket, 4)
    got = {orjson.loads(m["body"])["event_id"]: m["body"] for m in received}
    assert sorted(got) == [0, 1, 2, 3]
    for i, raw in enumerate([*bodies, event(3, MIB)]):
        assert orjson.loads(got[i])["action"] == orjson.loads(raw)["action"]
    assert object_keys(s3, out_bucket) == set()  # the Extended Client deleted them with their messages

    rows = {r["event_id"]: r for r in read_jsonl_dir(tmp_path / "out")}
    assert sorted(rows) == [0, 1, 2, 3]
    for i, raw in enumerate([*bodies, event(3, MIB)]):
        assert rows[i]["action"] == orjson.loads(raw)["action"]  # the whole payload, not the pointer
    (dead,) = read_jsonl_dir(tmp_path / "dlq")
    assert bucket in dead["error"] and missing_key in dead["error"], dead["error"]
    assert dead["payload_ref"] == f"{bucket}/{missing_key}" and dead["body"] == pointer_body(
        bucket, missing_key
    )
    assert drain(sqs, src) == []  # all five acked, the bad one too
    assert object_keys(s3, bucket) == set()  # and the three payloads deleted after
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    # Four pointers acked, four object deletes (the missing one's a no-op, as S3 answers it).
    assert metric(prom, "mq_ingest_deleted_payloads_total") == 4
    assert metric(prom, "mq_ingest_deserialization_errors_total") == 1


def test_payloads_stay_until_acked_and_go_once_acked(tmp_path, spark, sqs, s3, make_queue, moto_url, bucket):
    """kill -9 after the first batch's messages were deleted, before their objects: nothing is gone
    from the bucket, neither of the acked messages nor of those still to be read. The restarted
    run reads the rest, and deletes objects only after their messages."""
    src = make_queue()
    extended_client.send(moto_url, src, bucket, [event(i, 300 * 1024) for i in range(12)])
    stored = object_keys(s3, bucket)
    assert len(stored) == 12
    staging = {"dir": str(tmp_path / "staging"), "roll_messages": 6, "max_files_per_trigger": 1}
    cfg = job_config(tmp_path, staging=staging)  # 6 messages a batch: the kill leaves 6 unacked
    cfg["sources"] = [source(src, moto_url, visibility_timeout=3, on_bad_message="fail")]
    path = write_config(tmp_path, cfg)

    crashed = run_cli(path, env={"MQ_INGEST_CRASH_AT": "before_payload_delete"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert object_keys(s3, bucket) == stored  # messages deleted, their objects not yet: orphans at worst
    wait_all_visible(sqs, src)
    attrs = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["ApproximateNumberOfMessages"])
    deleted_before_kill = 12 - int(attrs["Attributes"]["ApproximateNumberOfMessages"])
    assert 0 < deleted_before_kill < 12, deleted_before_kill  # acked some, not all

    code, again = run_in_session(path)  # the restart, in the suite's Spark session
    assert code == 0, again
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(12))
    assert drain(sqs, src) == []
    left = object_keys(s3, bucket)
    # At most the payloads of the messages the killed run had deleted may be left (orphans; the
    # replayed journal deletes them when the queue accepts the handles again), never one whose
    # message was still to be read.
    assert left <= stored and len(left) <= deleted_before_kill, (left, deleted_before_kill)
