"""Job event delivery from a real job run to a JSON-lines file and a fake queue."""

from __future__ import annotations

import orjson
import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, start_cli, stop_cli, write_config
from tests.support.polling import wait_for

pytestmark = pytest.mark.spark


def delivered(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_text().splitlines()]


def events(msgs: list[dict]) -> list[str]:
    return [
        m["eventName"]
        for m in sorted(msgs, key=lambda m: m.get("eventId", 0))
        if m["messageType"] == "JOB_EVENT"
    ]


def start_log(msgs: list[dict]) -> str:
    parts = sorted((m for m in msgs if m["messageType"] == "JOB_START_LOG"), key=lambda m: m["offset"])
    assert parts, "no JOB_START_LOG"
    text = "".join(p["content"] for p in parts)
    assert [p["offset"] for p in parts] == [
        sum(len(q["content"]) for q in parts[:i]) for i in range(len(parts))
    ]
    assert all(p["length"] == len(text) for p in parts)
    return text


def test_clean_run_reports_start_log_events_quota_and_usage(tmp_path):
    queue = FakeQueue(str(tmp_path / "queues"), "in")
    queue.send_batch([{"body": body(i)} for i in range(30)])
    sink_queue = tmp_path / "events-queue"
    cfg = job_config(tmp_path)
    cfg["delivery"] = {
        "deploymentName": "orders-ingest",
        "workspace": "ws-1",
        "namespace": "prod",
        "tag": "team=data",
        "quota_interval": "1s",
        "start_log_part_chars": 256,
        "targets": [
            {"type": "file", "name": "file", "path": str(tmp_path / "events.jsonl")},
            {
                "type": "sink",
                "name": "queue",
                "sink": {
                    "type": "fake",
                    "name": "ev",
                    "path": str(sink_queue),
                    "queue": "job-events",
                    "body_format": "raw",
                },
            },
        ],
    }
    cfg["trigger"] = {"mode": "processing_time", "interval": "500ms"}  # streaming: usage is sent
    proc = start_cli(write_config(tmp_path, cfg))
    wait_for(
        lambda: len(read_jsonl_dir(tmp_path / "out")) == 30 and not queue.count()["total"], 180, "30 rows"
    )
    code, out = stop_cli(proc)
    assert code == 0, out[-3000:]
    msgs = delivered(tmp_path / "events.jsonl")
    assert events(msgs) == ["STARTING", "RUNNING", "STOPPING", "FINISHED"]
    kinds = {m["messageType"] for m in msgs}
    assert kinds == {"JOB_START_LOG", "JOB_EVENT", "RESOURCE_QUOTA", "JOB_RESOURCE_USAGE"}
    job_msgs = [m for m in msgs if m["messageType"] in ("JOB_START_LOG", "JOB_EVENT")]
    assert {(m["deploymentName"], m["workspace"], m["namespace"], m["tag"]) for m in job_msgs} == {
        ("orders-ingest", "ws-1", "prod", "team=data")
    }
    assert len({m["jobId"] for m in job_msgs}) == 1
    assert len({m["messageId"] for m in msgs}) == len(msgs)
    text = start_log(msgs)
    assert "loading config" in text and "query plan" in text and "StreamingRelation" in text
    usage = [m for m in msgs if m["messageType"] == "JOB_RESOURCE_USAGE"][-1]
    assert usage["messagesIn"] == 30 and usage["messagesOut"] == 30 and usage["sourceLag"] == {"src": 0}
    # The same messages went to the fake queue through the fake-queue sink.
    got = FakeQueue(str(sink_queue), "job-events").peek(1000)
    assert sorted(orjson.loads(m.body)["messageId"] for m in got) == sorted(m["messageId"] for m in msgs)


def test_failed_batch_and_failed_job_are_reported_with_the_error(tmp_path):
    queue = FakeQueue(str(tmp_path / "queues"), "in")
    queue.send_batch([{"body": body(i)} for i in range(5)])
    # Fails on the rows, not at analysis: a transform that cannot be analysed stops the job at
    # start instead (exit 2, tests/spark/test_cli.py), before any batch.
    failing = "SELECT event_id, raise_error('no_such_column here') AS x FROM source"
    cfg = job_config(tmp_path, transform=failing)
    cfg["delivery"] = {"targets": [{"type": "file", "path": str(tmp_path / "events.jsonl")}]}
    done = run_cli(write_config(tmp_path, cfg))
    assert done.returncode == 1
    msgs = delivered(tmp_path / "events.jsonl")
    names = events(msgs)
    assert names[:2] == ["STARTING", "RUNNING"] and names[-2:] == ["BATCH_FAILED", "FAILED"]
    failed = next(m for m in msgs if m.get("eventName") == "FAILED")
    assert "no_such_column" in failed["content"]
    assert "no_such_column" in next(m for m in msgs if m.get("eventName") == "BATCH_FAILED")["content"]
    assert not [m for m in msgs if m["messageType"] == "JOB_RESOURCE_USAGE"]  # a drain is a batch job
    assert queue.count()["total"] == 5  # nothing acked: the messages come back for the next run
