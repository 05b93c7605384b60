"""Claim-check on MNS through OSS's S3 API (moto's S3 server stands in for OSS): pointer bodies are
read from the bucket with the MNS AccessKey, and the objects deleted once their messages are."""

from __future__ import annotations

import orjson
import pytest

from ingest.config import parse_config
from ingest.connector.claim_check import pointer_body
from ingest.pipeline import Job
from tests.support.jobconfig import files_sink, job_config
from tests.support.jobs import metric, read_jsonl_dir
from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, depth, send_bodies

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_mns_pointer_bodies_are_read_from_oss_and_deleted_after_the_ack(
    tmp_path, spark, mns, moto_url, s3, bucket
):
    queue = create_queue(mns.url)
    big = [{"event_id": i, "action": f"a{i}" + "y" * 200_000} for i in range(3)]  # over MNS's 64 KB
    for i, record in enumerate(big):
        s3.put_object(Bucket=bucket, Key=f"p/{i}", Body=orjson.dumps(record))
    small = {"event_id": 9, "action": "small"}
    send_bodies(
        mns.url, queue, [pointer_body(bucket, f"p/{i}") for i in range(3)] + [orjson.dumps(small).decode()]
    )

    source = {
        "type": "mns",
        "name": "src",
        "endpoint": mns.url,
        "queueName": queue,
        "accessKeyId": AK_ID,
        "accessKeySecret": AK_SECRET,
        "batchSize": 16,
        "pollingWaitTime": "1s",
        "format": "json",
        "on_bad_message": "skip",  # one sink, no fail policy: the batch is written in one Spark job
        "claim_check": {"endpoint_url": moto_url, "delete_payload": True},
    }
    cfg = job_config(
        source,
        tmp_path,
        [files_sink(tmp_path)],
        schema="event_id BIGINT, action STRING",
        metrics={"file": str(tmp_path / "metrics.prom")},
    )
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0  # in this test's Spark session

    rows = sorted(read_jsonl_dir(tmp_path / "out"), key=lambda r: r["event_id"])
    assert [(r["event_id"], r["action"]) for r in rows] == [
        *[(r["event_id"], r["action"]) for r in big],
        (9, "small"),
    ]
    assert depth(mns.url, queue) == 0
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0  # deleted after their messages
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_deleted_payloads_total") == 3
