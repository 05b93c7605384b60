"""SQS → Spark → SQS end to end on moto (standard and FIFO), bad bodies, and kill -9 + restart."""

from __future__ import annotations

import signal
import time

import orjson
import pytest

from ingest.config import parse_config
from ingest.pipeline import Job
from tests.integration.test_sqs import drain
from tests.spark.jobs import body, job_config, read_jsonl_dir, run_cli, write_config

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def sqs_source(url, moto_url, **kw):
    src = {
        "type": "sqs",
        "name": "src",
        "sqs.url": url,
        "sqs.endpoint.url": moto_url,
        "sqs.waittime.seconds": 1,
        "visibility_timeout": 20,
        "receivers": 2,
    }
    return src | kw


def send(sqs, url, bodies, fifo_group=None):
    for i in range(0, len(bodies), 10):
        entries = []
        for k, b in enumerate(bodies[i : i + 10]):
            e = {"Id": str(k), "MessageBody": b}
            if fifo_group:
                e |= {"MessageGroupId": fifo_group(i + k), "MessageDeduplicationId": f"d{i + k}"}
            entries.append(e)
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def test_sqs_to_spark_to_sqs(tmp_path, spark, sqs, make_queue, moto_url):
    src, dst = make_queue(), make_queue()
    send(sqs, src, [body(i) for i in range(60)] + ["{broken"])
    cfg = job_config(
        tmp_path, sinks=[{"type": "sqs", "name": "out", "sqsUrl": dst, "endpoint_url": moto_url}]
    )
    cfg["sources"] = [sqs_source(src, moto_url)]
    job = Job(parse_config(cfg), echo=lambda s: None)
    assert job.run() == 0
    out = [orjson.loads(b) for b in drain(sqs, dst)]
    assert sorted(r["event_id"] for r in out) == list(range(60))
    assert "_meta" not in out[0]
    assert drain(sqs, src) == []
    s = job.metrics.summary()
    assert s["deserializationErrors"] == 1 and s["deletedMessages"] == 61


def test_fifo_to_fifo_keeps_group_order(tmp_path, spark, sqs, make_queue, moto_url):
    src, dst = make_queue(fifo=True), make_queue(fifo=True)
    send(sqs, src, [body(i) for i in range(30)], fifo_group=lambda i: f"g{i % 3}")
    cfg = job_config(
        tmp_path, sinks=[{"type": "sqs", "name": "out", "sqsUrl": dst, "endpoint_url": moto_url}]
    )
    cfg["sources"] = [sqs_source(src, moto_url, receivers=1)]
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0
    got = []
    while True:
        msgs = sqs.receive_message(QueueUrl=dst, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages", []
        )
        if not msgs:
            break
        got += [(m["Attributes"]["MessageGroupId"], orjson.loads(m["Body"])["event_id"]) for m in msgs]
        sqs.delete_message_batch(
            QueueUrl=dst,
            Entries=[{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)],
        )
    assert sorted(e for _, e in got) == list(range(30))
    for g in ("g0", "g1", "g2"):
        ids = [e for grp, e in got if grp == g]
        assert ids == sorted(ids), f"group {g} out of order: {ids}"


def test_kill9_after_sink_then_restart(tmp_path, sqs, make_queue, moto_url):
    src = make_queue()
    send(sqs, src, [body(i) for i in range(120)])
    cfg = job_config(
        tmp_path, staging={"dir": str(tmp_path / "staging"), "roll_messages": 20, "max_files_per_trigger": 2}
    )
    cfg["sources"] = [sqs_source(src, moto_url, visibility_timeout=3)]
    path = write_config(tmp_path, cfg)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    crashed = run_cli(path, env={**env, "MQ_INGEST_CRASH_AT": "after_sink", "MQ_INGEST_CRASH_AFTER": "2"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    time.sleep(3.5)
    again = run_cli(path, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    got = sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))
    assert got == list(range(120))
    assert drain(sqs, src) == []
