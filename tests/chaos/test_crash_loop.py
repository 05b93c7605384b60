"""Chaos: a job that crash-loops on a queue must not leave the recovering run more than it can work off.

Before recovery was bounded, every start pulled the queue into staging and every staged file was
read again after a crash: 20 kills over 20,000 events left a drain run 380,000 stale rows (20x).
Now a restart replays at most the batch Spark had planned and the rest comes back from the
queue. ``bench/crash_amplification.py`` times the full scenario against a clean drain.
"""

from __future__ import annotations

import os
import random

import pytest
import yaml

from sources.fake.store import FakeQueue
from tests.support.jobs import (
    body,
    job_config,
    kill_while_running,
    metric,
    read_jsonl_dir,
    run_in_session,
    wait_all_visible,
    write_config,
)

pytestmark = pytest.mark.chaos
N = 2000
KILLS = 3


def test_a_crash_looping_job_leaves_a_bounded_replay(tmp_path, spark):
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "11")))
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(N)])
    # The scenario: visibility 5 s, 2 receivers, the default caps.
    cfg = job_config(
        tmp_path, source={"visibility_timeout": "5s"}, staging={"dir": str(tmp_path / "staging")}
    )
    drain_cfg = write_config(tmp_path, cfg)
    continuous = tmp_path / "continuous.yaml"
    continuous.write_text(yaml.safe_dump(cfg | {"trigger": {"mode": "processing_time", "interval": "500ms"}}))
    for kill in range(KILLS):
        kill_while_running(continuous, rng.uniform(4, 12), f"kill {kill}")
    wait_all_visible(q)
    code, out = run_in_session(drain_cfg)  # the recovering run, in the suite's Spark session
    assert code == 0, out
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(N))
    assert q.count()["total"] == 0
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    # What the recovering run read twice: at most one replayed batch (never more than was in
    # flight, so at most N) on top of the queue's own redeliveries (at most N).
    assert metric(prom, "mq_ingest_duplicate_messages_total") <= 2 * N
    assert metric(prom, "mq_ingest_stale_handles_total") <= N
    assert metric(prom, "mq_ingest_failed_deletes_total") == 0
