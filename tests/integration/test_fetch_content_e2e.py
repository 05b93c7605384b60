"""The reference's FETCH_CONTENT pipeline: OSS upload notifications on an MNS queue → the OSS event
columns → ``fetch_content(bucket, key)`` in the transform → a files sink. The MNS emulator and
moto's S3 server (standing in for OSS's S3 API, as in test_claim_check_mns.py) on 127.0.0.1."""

from __future__ import annotations

import base64
import json

import pytest

from ingest.config import parse_config
from ingest.errors import FatalError
from ingest.pipeline import Job
from tests.support.jobconfig import files_sink, job_config
from tests.support.jobs import read_jsonl_dir
from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, depth, send_bodies
from tests.support.oss_notifications import notification

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SCHEMA = "eventName STRING, ossBucketName STRING, ossObjectKey STRING"
TRANSFORM = """
SELECT ossObjectKey AS key, f.content, f.error
FROM (SELECT *, fetch_content(ossBucketName, ossObjectKey) AS f FROM source)
"""


def uploaded(bucket: str, key: str) -> str:
    """The notification OSS publishes when ``key`` is put in ``bucket``."""
    event = notification(key=key)
    event["events"][0]["oss"]["bucket"]["name"] = bucket
    return json.dumps(event)


def oss_events_source(mns_url: str, queue: str, **claim_check) -> dict:
    """An MNS source of OSS notifications whose claim_check (where fetch_content reads) is ``claim_check``."""
    return {
        "type": "mns",
        "name": "oss_events",
        "endpoint": mns_url,
        "queueName": queue,
        "accessKeyId": AK_ID,
        "accessKeySecret": AK_SECRET,
        "format": "json",
        "messageType": "OSS",
        "batchSize": 16,
        "pollingWaitTime": "1s",
        "claim_check": claim_check,
    }


def test_uploaded_objects_are_fetched_and_a_missing_or_oversized_one_is_its_rows_error(
    tmp_path, spark, mns, moto_url, s3, bucket
):
    image = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3  # not UTF-8: bytes, not text
    s3.put_object(Bucket=bucket, Key="photos/cat.png", Body=image)
    s3.put_object(Bucket=bucket, Key="photos/huge.png", Body=b"x" * 2049)
    queue = create_queue(mns.url)
    keys = ["photos/cat.png", "photos/huge.png", "photos/deleted.png"]
    send_bodies(mns.url, queue, [uploaded(bucket, k) for k in keys])  # base64, as OSS sends them

    source = oss_events_source(mns.url, queue, endpoint_url=moto_url, fetch_content_max_bytes="2KiB")
    cfg = job_config(source, tmp_path, [files_sink(tmp_path)], schema=SCHEMA, transform=TRANSFORM)
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0  # in this test's Spark session

    rows = {r["key"]: r for r in read_jsonl_dir(tmp_path / "out")}
    assert sorted(rows) == sorted(keys)  # every event reached the sink, the failed ones too
    cat, huge, deleted = (rows[k] for k in keys)
    assert base64.b64decode(cat["content"]) == image and cat.get("error") is None
    assert huge.get("content") is None
    assert huge["error"] == (
        f"fetch_content: object 'photos/huge.png' in bucket '{bucket}' is 2049 bytes, "
        "over claim_check.fetch_content_max_bytes (2048)"
    )
    assert deleted.get("content") is None
    assert deleted["error"].startswith(
        f"fetch_content: GetObject of object 'photos/deleted.png' in bucket '{bucket}' failed: NoSuchKey"
    )
    assert depth(mns.url, queue) == 0  # every event acked, the failed ones too


def test_an_unreachable_store_fails_the_batch_and_the_event_stays_on_its_queue(
    tmp_path, spark, mns, free_port
):
    """Not a row's error: with no retry left the batch fails, nothing is written or acked, and
    the job's error names the object and the endpoint (not only "the Python worker raised")."""
    queue = create_queue(mns.url)
    send_bodies(mns.url, queue, [uploaded("media-in", "photos/cat.png")])
    store = f"http://127.0.0.1:{free_port}"  # nothing listens there
    source = oss_events_source(mns.url, queue, endpoint_url=store, max_retries=0)
    cfg = job_config(source, tmp_path, [files_sink(tmp_path)], schema=SCHEMA, transform=TRANSFORM)
    with pytest.raises(FatalError) as err:
        Job(parse_config(cfg), echo=lambda s: None).run()
    assert "TransientError: GetObject of object 'photos/cat.png' in bucket 'media-in'" in str(err.value)
    assert store in str(err.value)
    assert read_jsonl_dir(tmp_path / "out") == []
    assert depth(mns.url, queue) == 1  # still there, to be read again
