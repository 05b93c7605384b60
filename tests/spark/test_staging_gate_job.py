"""The staging gate in a running job: under load each micro-batch carries about ``batch_messages``,
however short the trigger interval."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir, run_in_session, write_config

pytestmark = pytest.mark.spark
N = 5000
RATE = 1000
"""Messages a second sent while the job runs: 200 a trigger interval, so batches without the gate
would be a fifth of ``batch_messages``. ``batch_wait`` is long, so a stall of the sender on a busy
machine is not taken for a low rate, nor, with 5 s long polls, for an empty queue; the tail goes
when the receivers find the queue empty."""


def send_paced(path: str, running: Path, stop: threading.Event) -> None:
    """Once ``running`` exists (the query's first batch committed), send ``N`` events at ``RATE``
    a second, in 50-message chunks."""
    while not running.exists():
        if stop.wait(0.05):
            return
    q = FakeQueue(path, "in")
    started = time.monotonic()
    for first in range(0, N, 50):
        q.send_batch([{"body": body(i)} for i in range(first, first + 50)])
        if stop.wait(max(0.0, started + (first + 50) / RATE - time.monotonic())):
            return


def rows_per_batch(out) -> dict[int, int]:
    """Rows the files sink wrote, by batch id (committed batches only)."""
    counts: Counter[int] = Counter()
    for part in out.glob("batch_id=*/part-*"):
        if (part.parent / "_SUCCESS").exists():
            batch = int(part.parent.name.split("=", 1)[1])
            counts[batch] += sum(1 for line in part.read_bytes().splitlines() if line.strip())
    return dict(sorted(counts.items()))


def test_under_load_each_micro_batch_carries_about_batch_messages(tmp_path, spark):
    queues = str(tmp_path / "queues")
    q = FakeQueue(queues, "in")
    q.send(body(-1))  # the first batch: the rest is sent once the query runs
    cfg = job_config(
        tmp_path,
        staging={"roll_messages": 100, "roll_interval": "100ms", "batch_messages": 1000, "batch_wait": "30s"},
        source={"wait_time": "5s"},
        trigger={"mode": "available_now", "interval": "200ms", "idle_rounds": 1, "drain_wait": "5s"},
    )
    stop = threading.Event()
    sender = threading.Thread(
        target=send_paced, args=(queues, tmp_path / "out" / "batch_id=0" / "_SUCCESS", stop), daemon=True
    )
    sender.start()
    try:
        code, out = run_in_session(write_config(tmp_path, cfg))
    finally:
        stop.set()
        sender.join(30)
    assert code == 0, out
    sizes = rows_per_batch(tmp_path / "out")
    written = sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))
    assert written == list(range(-1, N)), "every event once"
    assert sum(sizes.values()) == N + 1
    assert q.count()["total"] == 0
    # The first batch is the one event sent before the start, the last takes what is left.
    middle = list(sizes.values())[1:-1]
    assert middle, f"the sends spread over several batches: {sizes}"
    assert all(n >= 1000 for n in middle), f"a batch below batch_messages: {sizes}"
