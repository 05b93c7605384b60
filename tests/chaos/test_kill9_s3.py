"""Chaos on object storage: a continuous job with its staging, checkpoint, state and sink all on S3
(moto's S3 server, a process of its own), kill -9 at random moments, restarts, a drain: the books hold.

Nothing of the job is on a local path but the fake queue it reads: the staged files, Spark's
checkpoint, the ack journals, the lock, the dedup state (delta-rs) and the files sink's output
are objects, written through boto3, delta-rs and Hadoop's S3A.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time

import psutil
import pytest
import yaml

from checkpoints.state import StateTable
from tests.support.fake_job import seed_job
from tests.support.jobs import run_cli, start_cli, wait_all_visible
from tests.support.s3_server import S3Server, s3_server

pytestmark = pytest.mark.chaos
N = 400
DUPS = 10
LAKE = "s3a://lake/orders"


def on_s3(cfg_path) -> dict:
    """The seeded job with everything but its queue moved to the bucket ``lake``."""
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["checkpoint"] = f"{LAKE}/checkpoint"
    cfg["state"]["path"] = f"{LAKE}/state"
    cfg["staging"]["dir"] = f"{LAKE}/staging"
    cfg["sinks"] = [{"type": "files", "name": "out", "path": f"{LAKE}/out", "format": "jsonl"}]
    cfg.pop("metrics", None)
    return cfg


def kill_tree_after(config, seconds: float, env: dict, what: str) -> None:
    """Start the job; after ``seconds`` SIGKILL it and every process under it (its driver JVM too)."""
    proc = start_cli(config, quiet=True, env=env)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    alive = proc.poll() is None
    if alive:
        family = psutil.Process(proc.pid).children(recursive=True)
        for p in family:
            with contextlib.suppress(psutil.Error):
                p.kill()
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    assert alive, f"{what}: the job was not running (rc={proc.returncode}): {err}"


def drain_and_check_books(s3: S3Server, q, ids: list[str], cfg_path) -> None:
    """Restart (as a scheduled run would) until the queue is empty; then every id once in the sink
    on S3, the queue empty, and each key once in the state table, read by delta-rs."""
    for _ in range(3):
        wait_all_visible(q)
        done = run_cli(cfg_path, env=s3.env, timeout=300)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        if q.count()["total"] == 0:
            break
    assert not [line for line in done.stderr.splitlines() if line.startswith("error:")]
    got = sorted(r["event_id"] for r in s3.jsonl_rows("lake", "orders/out/"))
    assert got == list(range(N)), f"lost {set(range(N)) - set(got)}; doubled {len(got) - len(set(got))}"
    assert q.count()["total"] == 0, q.count()
    with pytest.MonkeyPatch.context() as env:
        for k, v in s3.env.items():
            env.setenv(k, v)
        state = StateTable(f"{LAKE}/state", "t-job", 86400)
        state.open()
        keys = state.keys()
    assert len(keys) == len(set(keys)) and set(keys) == set(ids)


def test_kill9_at_random_moments_with_everything_on_s3(tmp_path):
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "11")))
    with s3_server() as s3:
        s3.bucket("lake")
        q, ids, cfg_path = seed_job(tmp_path, N, DUPS)
        drain = on_s3(cfg_path)
        cfg_path.write_text(yaml.safe_dump(drain))
        continuous = tmp_path / "continuous.yaml"
        continuous.write_text(
            yaml.safe_dump(drain | {"trigger": {"mode": "processing_time", "interval": "500ms"}})
        )
        for kill in range(2):
            kill_tree_after(continuous, rng.uniform(12, 25), s3.env, f"kill {kill}")
        drain_and_check_books(s3, q, ids, cfg_path)


def test_kill9_while_the_gate_publishes_to_s3_then_restart(tmp_path):
    """Killed between two PUTs of one publish: some held files are objects Spark lists, the rest
    were in the driver's memory and are gone. Their messages are still in flight on the queue and
    come back; the restart removes the published objects no batch planned."""
    with s3_server() as s3:
        s3.bucket("lake")
        q, ids, cfg_path = seed_job(tmp_path, N, DUPS)
        cfg = on_s3(cfg_path)
        cfg["staging"] |= {"batch_messages": 150, "batch_wait": "1s"}  # files of 50: publishes of 3+
        cfg_path.write_text(yaml.safe_dump(cfg))
        crash = {"MQ_INGEST_CRASH_AT": "during_publish", "MQ_INGEST_CRASH_AFTER": "2"}
        crashed = run_cli(cfg_path, env={**s3.env, **crash})
        assert crashed.returncode == -signal.SIGKILL, f"not killed in a publish: {crashed.stderr[-3000:]}"
        assert [k for k in s3.keys("lake", "orders/staging/") if k.endswith(".jsonl")], "nothing published"
        drain_and_check_books(s3, q, ids, cfg_path)
