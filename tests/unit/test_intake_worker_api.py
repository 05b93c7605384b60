"""``ingest.IntakeWorker``: an intake worker started in-process (no Spark), and stopped."""

from __future__ import annotations

import json
import threading

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config
from tests.support.polling import wait_for


def test_a_worker_started_in_process_stages_under_its_id_and_stops_with_exit_0(tmp_path):
    from ingest import IntakeWorker, parse_config

    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(30)])
    cfg = parse_config(
        job_config(
            tmp_path,
            intake={"mode": "workers", "stop_timeout": 0},
            trigger={"mode": "processing_time"},
            staging={"max_in_flight": 20},
            delivery={"targets": [{"type": "file", "path": str(tmp_path / "events.jsonl")}]},
        )
    )
    lines: list[str] = []
    worker = IntakeWorker(cfg, worker_id="api-1", echo=lines.append)
    result: dict[str, int] = {}
    runner = threading.Thread(target=lambda: result.setdefault("code", worker.run()))
    runner.start()
    try:
        wait_for(lambda: worker.metrics.total("staged") >= 20, 30, "staged up to its in-flight cap")
        wait_for(lambda: worker.metrics.total("backpressurePauses") > 0, 30, "paused at its cap")
    finally:
        worker.stop()
        runner.join(30)
    assert result == {"code": 0}, lines
    assert lines[0] == f"intake worker api-1 of job t-job receiving into {tmp_path / 'staging'}"
    staged = [
        json.loads(line)["body"] for f in (tmp_path / "staging").glob("api-1~*.jsonl") for line in f.open()
    ]
    assert len(staged) == len({json.loads(b)["event_id"] for b in staged}) == worker.metrics.total("staged")
    # No job committed them: they stay hidden on the queue for the job to delete once it has; what
    # it had not staged went back.
    assert q.count()["in_flight"] == len(staged)
    assert f"{len(staged)} staged message(s) not yet acked after 0s" in lines[-1]
    [lock] = (tmp_path / "staging" / "_workers" / "api-1").glob("lock.*")
    assert json.loads(lock.read_text())["released"] is True, "its lease was handed back"
    # Its job events name it (the job's own processes and other workers report to the same targets).
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    said = {e["eventName"]: e["content"] for e in events if e["messageType"] == "JOB_EVENT"}
    assert said["STARTING"].startswith("intake worker api-1 of job t-job starting on ")
    assert said["RECEIVER_PAUSED"].startswith("intake worker api-1: src#")
    assert said["STOPPING"] == "intake worker api-1: stop requested"
    assert said["FINISHED"] == "intake worker api-1 of job t-job finished"
