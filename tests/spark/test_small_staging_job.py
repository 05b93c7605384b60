"""Staging on a volume smaller than one roll: a real 2 MiB tmpfs, a drain of 20,000 messages."""

from __future__ import annotations

import shutil
import subprocess

import orjson
import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import job_config, read_jsonl_dir, run_cli, write_config

pytestmark = pytest.mark.spark
N = 20_000


def padded_body(i: int) -> str:
    """A ~250 B body: its staged envelope line is ~770 B, so one default roll (5000 lines) is
    ~3.7 MiB, more than the whole volume."""
    return orjson.dumps(
        {
            "event_id": i,
            "user_id": i % 7,
            "action": "click-" + "x" * 150,
            "amount": i / 2,
            "ts": "2026-01-02T03:04:05.678Z",
        }
    ).decode()


@pytest.fixture
def small_volume(tmp_path):
    """A 2 MiB tmpfs mounted at ``tmp_path/staging`` (needs root, as CI runs); unmounted after."""
    path = tmp_path / "staging"
    path.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a 2 MiB file system")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs (root only): {r.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)  # busy: detach it anyway


def test_a_drain_through_a_staging_volume_smaller_than_one_roll_delivers_every_message_once(
    tmp_path, small_volume
):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": padded_body(i)} for i in range(N)])
    # The default roll sizes (5000 lines, 8 MiB): the first roll alone does not fit. The volume
    # is full until the first batch (Spark's start included) commits: well under give_up_after.
    cfg = job_config(tmp_path, staging={"dir": str(small_volume), "give_up_after": "120s"})
    r = run_cli(write_config(tmp_path, cfg), timeout=540)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ids = [row["event_id"] for row in read_jsonl_dir(tmp_path / "out")]
    assert len(ids) == N and sorted(ids) == list(range(N)), "every message delivered exactly once"
    assert q.count()["total"] == 0, "every message deleted from the queue"
