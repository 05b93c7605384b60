"""MNS → Spark → files, killed with SIGKILL at the risky points and restarted: nothing lost, each row once."""

from __future__ import annotations

import signal

import pytest

from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, run_in_session, write_config
from tests.support.mns_server import AK_ID, AK_SECRET, create_queue, depth, send_bodies, wait_all_visible

pytestmark = [pytest.mark.chaos, pytest.mark.spark, pytest.mark.integration]
N = 90


# after_sink is covered on the fake queue and SQS; these two meet MNS-specific handle changes.
@pytest.mark.parametrize("point", ["before_ack", "during_extend"])
def test_kill9_then_restart_delivers_each_message_once(tmp_path, spark, mns, point):
    queue = create_queue(mns.url, visibility_timeout=3)
    send_bodies(mns.url, queue, [body(i) for i in range(N)])
    cfg = job_config(
        tmp_path, staging={"dir": str(tmp_path / "staging"), "roll_messages": 15, "max_files_per_trigger": 2}
    )
    cfg["sources"] = [
        {
            "type": "mns",
            "name": "src",
            "endpoint": "${env:MNS_ENDPOINT}",
            "queueName": queue,
            "accessKeyId": AK_ID,
            "accessKeySecret": "${env:MNS_SECRET}",
            "batchSize": 16,
            "pollingWaitTime": "1s",
            "receivers": 2,
            "visibility_timeout": 3,
            "format": "json",
            "on_bad_message": "skip",
        }
    ]
    path = write_config(tmp_path, cfg)
    env = {"MNS_ENDPOINT": mns.url, "MNS_SECRET": AK_SECRET}
    crash = {"MQ_INGEST_CRASH_AT": point, "MQ_INGEST_CRASH_AFTER": "1" if point == "during_extend" else "2"}
    crashed = run_cli(path, env=env | crash)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    wait_all_visible(mns.url, queue)  # the crashed run's in-flight messages come back
    code, again = run_in_session(path, env=env)  # the restart, in the suite's Spark session
    assert code == 0, again
    assert AK_SECRET not in crashed.stdout + crashed.stderr + again
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(N))
    assert depth(mns.url, queue) == 0
