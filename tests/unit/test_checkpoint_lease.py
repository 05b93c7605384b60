"""The checkpoint lock on S3 (a lease per generation, by conditional PUT) against moto's S3 server
on 127.0.0.1: one live instance, a kill -9 not blocking the restart, a stale lease taken over, a
paused holder stopping once taken over, and racing starters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from checkpoints.lease import Lease
from checkpoints.lock import CheckpointLock
from ingest.errors import ConfigError, FatalError
from ingest.storage import store_for
from tests.support.jobs import ROOT
from tests.support.polling import wait_for
from tests.support.s3_server import S3Server, s3_server_in_env

HOLDER = """
import sys, time
from checkpoints.lease import Lease
from ingest.storage import store_for
lease = Lease(store_for(sys.argv[1]), heartbeat=0.2, stale=1.0)
lease.acquire()
print("held", flush=True)
lease.lost.wait()
print(lease.reason, flush=True)
sys.exit(3)
"""
"""A job in short: it holds the lease, renews it every 0.2 s, and stops (exit 3) once it lost it."""


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server_in_env("locks") as server:
        yield server


def taken(lease: Lease) -> bool:
    """Whether ``lease`` was acquired now (False: refused, the holder's lease still live)."""
    try:
        lease.acquire()
    except ConfigError:
        return False
    return True


def holder(s3: S3Server, url: str) -> subprocess.Popen:
    env = {**os.environ, **s3.env, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_second_instance_is_refused_and_the_released_lock_is_taken_at_once(s3):
    first = CheckpointLock("s3a://locks/a/ckpt")
    first.acquire()
    with pytest.raises(
        ConfigError, match=r"checkpoint s3a://locks/a/ckpt is in use by another running instance"
    ):
        CheckpointLock("s3a://locks/a/ckpt").acquire()
    first.release()
    with CheckpointLock("s3://locks/a/ckpt") as again:  # the same objects, however spelled
        assert again.held
    assert s3.keys("locks", "a/") == ["a/ckpt/mq_ingest/lock.1"]  # older generations deleted


def test_a_holder_killed_by_sigkill_does_not_block_its_restart(s3):
    child = holder(s3, "s3a://locks/k/mq_ingest")
    child.kill()
    child.wait()
    lock = CheckpointLock("s3a://locks/k")  # a long stale time: only the dead pid lets it in
    lock.acquire()
    assert s3.keys("locks", "k/") == ["k/mq_ingest/lock.1"], "generation 1, taken from the dead holder"
    lock.release()


def test_a_stale_lease_of_another_host_is_taken_over_after_the_stale_time(s3):
    beat = time.time()
    record = {"host": "elsewhere", "pid": 1, "start": "1", "beat": beat, "released": False}
    s3.client().put_object(Bucket="locks", Key="s/mq_ingest/lock.4", Body=orjson.dumps(record))
    with pytest.raises(
        ConfigError, match=r"in use by another running instance of this job \(host elsewhere, pid 1"
    ):
        Lease(store_for("s3a://locks/s/mq_ingest"), stale=60).acquire()
    lease = Lease(store_for("s3a://locks/s/mq_ingest"), heartbeat=0.2, stale=1.0)
    wait_for(lambda: taken(lease), 10, "the stale lease taken over", every=0.2)
    assert time.time() - beat > 1.0, "not before the stale time"
    assert lease.generation == 5
    lease.release()


def test_a_paused_holder_learns_it_was_taken_over_and_stops(s3):
    child = holder(s3, "s3a://locks/p/mq_ingest")
    os.kill(child.pid, signal.SIGSTOP)  # paused, as a GC pause or a frozen VM would
    try:
        lease = Lease(store_for("s3a://locks/p/mq_ingest"), heartbeat=0.2, stale=1.0)
        wait_for(lambda: taken(lease), 10, "the paused holder's lease taken over", every=0.2)
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 3
    assert "the lock was taken over by host" in out and f"pid {os.getpid()}" in out
    lease.ensure_held()  # the new holder holds it
    lease.release()


def test_a_lost_lease_stops_the_next_batch(s3):
    lease = Lease(store_for("s3a://locks/e/mq_ingest"), heartbeat=30, stale=60)
    lease.acquire()
    lease.store.create("lock.1", b"{}")  # another instance took it over while this one was paused
    lease._checked -= 120  # ...for longer than two heartbeats
    with pytest.raises(FatalError, match="the lock was taken over"):
        lease.ensure_held()
    lease.release()


@pytest.mark.parametrize("stale", [False, True], ids=["new", "stale"])
def test_of_racing_starters_exactly_one_wins(s3, stale):
    prefix = f"r-{stale}/mq_ingest"
    if stale:
        record = {"host": "elsewhere", "pid": 1, "start": "1", "beat": time.time() - 3600}
        s3.client().put_object(Bucket="locks", Key=f"{prefix}/lock.0", Body=orjson.dumps(record))
    leases = [Lease(store_for(f"s3a://locks/{prefix}"), heartbeat=30) for _ in range(4)]
    start = threading.Barrier(len(leases))
    won: list[Lease] = []
    refused: list[str] = []

    def race(lease: Lease) -> None:
        start.wait()
        try:
            lease.acquire()
            won.append(lease)
        except ConfigError as err:
            refused.append(str(err))

    threads = [threading.Thread(target=race, args=(lease,)) for lease in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 3
    assert all("in use by another running instance" in r for r in refused)
    won[0].release()
