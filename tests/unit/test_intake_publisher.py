"""The job's side of intake workers, on the real fake queue and a local staging dir: each live worker
gets the acks of its committed messages, a gone worker's are deleted by the job while their leases
hold (and only counted once they may have lapsed), and a paused worker fences itself."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import orjson
import pytest

from checkpoints.journal import AckJournal, own_dir
from checkpoints.lease import Lease
from ingest.config import parse_config
from ingest.intake.owners import TAKING_OVER, by_owner, new_worker_id, owner_of, worker_dir
from ingest.intake.parts import ack_options
from ingest.intake.publisher import Publisher, remove_taken
from ingest.metrics import Metrics
from ingest.storage import store_for
from sources.fake.source import FakeSource
from tests.support.jobs import ROOT
from tests.support.polling import wait_for


def job(tmp_path):
    return parse_config(
        {
            "name": "j",
            "sources": [
                {
                    "type": "fake",
                    "name": "src",
                    "path": str(tmp_path / "q"),
                    "queue": "in",
                    "visibility_timeout": 30,
                    "format": "raw",
                }
            ],
            "sinks": [{"type": "console", "name": "c"}],
            "checkpoint": str(tmp_path / "ck"),
            "state": {"path": str(tmp_path / "st")},
            "staging": {"dir": str(tmp_path / "sg")},
            "intake": {"mode": "workers", "heartbeat": 1, "stale_after": 3},
        }
    )


def received(source: FakeSource, n: int) -> list[str]:
    source.store.send_batch([{"body": f"b{i}"} for i in range(n)])
    handles: list[str] = []
    wait_for(
        lambda: handles.extend(m.receipt_handle for m in source.receive(10, 0.05)) or len(handles) >= n, 5
    )
    return handles


def setup(tmp_path):
    cfg = job(tmp_path)
    source = FakeSource(cfg.sources[0])
    metrics = Metrics("j")
    journal = AckJournal(own_dir(cfg.checkpoint))
    publisher = Publisher(cfg, journal, {"src": source}, metrics, **ack_options(cfg, {}, cfg.checkpoint))
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    return cfg, source, metrics, journal, publisher


def gone_worker(cfg, worker: str, held_for: float) -> None:
    """A worker's lease as a ``kill -9`` leaves it: a pid of this host that has ended."""
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    record = {
        "host": socket.gethostname(),
        "pid": int(ended.stdout),
        "start": "0",
        "beat": time.time(),
        "released": False,
        "held_until": time.time() + held_for,
    }
    store_for(worker_dir(cfg.staging.dir, worker)).write("lock.0", orjson.dumps(record))


def test_names_say_which_worker_staged_a_file():
    assert owner_of("/sg/w-1~0001-000001-ab.jsonl") == "w-1" and owner_of("/sg/0001-000001-ab.jsonl") is None
    assert new_worker_id("node-3.a_b") == "node-3.a_b" and "~" not in new_worker_id()
    assert by_owner({"w1": [("s", "h")], "": [("s", "g")]}) == {"w1": [("s", "h")], None: [("s", "g")]}
    try:
        new_worker_id("a/b")
    except ValueError as err:
        assert "worker id 'a/b'" in str(err)
    else:
        raise AssertionError("a worker id with a slash was taken")


def test_a_live_worker_gets_its_committed_acks_and_a_driver_staged_batch_is_deleted(tmp_path):
    cfg, source, metrics, journal, publisher = setup(tmp_path)
    live = Lease(store_for(worker_dir(cfg.staging.dir, "w1")), 1, 3, what="intake worker", fence=True)
    live.acquire()
    try:
        mine, drivers = received(source, 3), received(source, 2)
        journal.write(0, {"w1": [("src", h) for h in mine], "": [("src", h) for h in drivers]})
        assert publisher.reconcile() == 0  # not committed: nothing handed out
        (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
        assert publisher.reconcile() == 1
        handed = AckJournal(worker_dir(cfg.staging.dir, "w1"), shared=True)
        assert handed.pending() == [0] and [tuple(e) for e in handed.read(0)] == [("src", h) for h in mine]
        assert journal.pending() == [] and publisher.live.keys() == {"w1"} and not publisher.workers_done()
        counts = source.store.count()
        assert counts["in_flight"] == 3 and counts["total"] == 3  # the driver-staged two were deleted
        assert metrics.by_label("publishedAcks", "worker") == {"w1": 3.0}
    finally:
        live.release()


def test_a_gone_workers_committed_messages_are_deleted_by_the_job(tmp_path):
    cfg, source, metrics, journal, publisher = setup(tmp_path)
    waiting, later = received(source, 4), received(source, 3)
    gone_worker(cfg, "dead", held_for=60)
    AckJournal(worker_dir(cfg.staging.dir, "dead")).write(7, [("src", h) for h in waiting])
    folder = tmp_path / "sg" / "_workers" / "dead"
    (folder / ".lock.0.tmp").write_text("{}")  # its renewal, cut by the kill -9 mid-write
    (folder / "acks" / ".6.json.tmp").write_text("[]")  # a job killed while handing it acks
    (tmp_path / "sg" / "_held").mkdir(parents=True)
    (tmp_path / "sg" / "_held" / "dead~1-000001-ab.jsonl").write_text("{}\n")
    journal.write(8, {"dead": [("src", h) for h in later]})
    (tmp_path / "ck" / "commits" / "8").write_text("v1\n{}")
    publisher.reconcile()
    assert source.store.count()["total"] == 0
    assert metrics.total("deletedMessages") == 7 and metrics.total("failedDeletes") == 0
    assert not folder.exists(), "a folder left behind is never swept again"
    assert not os.listdir(tmp_path / "sg" / "_held")
    assert not publisher.workers_done()  # leftovers of a killed worker: a drain waits for live ones


def test_a_gone_workers_messages_past_their_leases_are_left_to_come_back(tmp_path):
    cfg, source, metrics, _, publisher = setup(tmp_path)
    handles = received(source, 5)
    gone_worker(cfg, "late", held_for=-1)
    AckJournal(worker_dir(cfg.staging.dir, "late")).write(3, [("src", h) for h in handles])
    publisher.reconcile()
    assert source.store.count()["in_flight"] == 5  # not deleted with handles that may have lapsed
    assert metrics.total("expiredHandles") == 5 and metrics.total("deletedMessages") == 0


HOLDER = """
import sys
from checkpoints.lease import Lease
from ingest.storage import store_for
lease = Lease(store_for(sys.argv[1]), heartbeat=0.2, stale=1.0, what="intake worker", fence=True)
lease.acquire()
print("held", flush=True)
lease.lost.wait()
print(lease.reason, flush=True)
sys.exit(3)
"""


def test_a_paused_worker_whose_lease_the_job_took_and_removed_stops_when_it_resumes(tmp_path):
    folder = tmp_path / "sg" / "_workers" / "w"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    os.kill(child.pid, signal.SIGSTOP)
    try:
        # Stale to the job: it takes the lease over and removes the folder (Publisher.sweep).
        taker = Lease(store_for(str(folder)), 0.2, 1.0, what="intake worker")
        wait_for(lambda: _took(taker), 10)
        taker.release()
        store = store_for(str(folder))
        store.delete(store.list())
    finally:
        os.kill(child.pid, signal.SIGCONT)
    assert child.wait(10) == 3
    assert "no lease renewal for" in child.stdout.read()
    assert not os.listdir(folder)  # it wrote no lease again


def _took(lease: Lease) -> bool:
    from ingest.errors import ConfigError

    try:
        lease.acquire()
    except ConfigError:
        return False
    return True


def test_a_worker_restarted_under_the_id_of_one_taken_over_gets_its_acks(tmp_path):
    """A worker restarted with its ``--worker-id`` after the job took its predecessor over (systemd,
    a StatefulSet) is live again: its committed messages' acks are its own, not left to lapse."""
    cfg, source, metrics, journal, publisher = setup(tmp_path)
    gone_worker(cfg, "w1", held_for=-1)
    publisher.reconcile()
    assert "w1" in publisher.gone and not publisher.live
    again = Lease(store_for(worker_dir(cfg.staging.dir, "w1")), 1, 3, what="intake worker", fence=True)
    again.acquire()
    try:
        handles = received(source, 3)
        journal.write(4, {"w1": [("src", h) for h in handles]})
        (tmp_path / "ck" / "commits" / "4").write_text("v1\n{}")
        assert publisher.reconcile() == 1  # within a heartbeat of the sweep that found w1 gone
        handed = AckJournal(worker_dir(cfg.staging.dir, "w1"), shared=True)
        assert handed.pending() == [4] and [tuple(e) for e in handed.read(4)] == [("src", h) for h in handles]
        assert publisher.live.keys() == {"w1"} and not publisher.workers_done()
        assert metrics.total("expiredHandles") == 0 and source.store.count()["in_flight"] == 3
    finally:
        again.release()


def test_a_worker_starting_while_the_job_takes_its_predecessor_over_waits_for_the_job(tmp_path):
    """A restart under the id of a worker the job is taking over (deleting its committed messages)
    waits until the job is done with the folder, where it had failed with exit 2; a live worker of
    that id still refuses the start at once, naming the worker's folder."""
    from ingest import IntakeWorker
    from ingest.errors import ConfigError

    cfg = setup(tmp_path)[0]
    folder = worker_dir(cfg.staging.dir, "w1")
    taking = Lease(store_for(folder), 1, 3, details=lambda: {TAKING_OVER: True}, what="intake worker")
    taking.acquire()
    taken = taking.generation
    done = threading.Timer(0.5, taking.release)
    done.start()
    worker = IntakeWorker(cfg, "w1", echo=lambda line: None)
    try:
        worker._take_lease()  # once the job released the lease, and before it removes it
        assert worker.lease.generation == 1
        renewing = tmp_path / "sg" / "_workers" / "w1" / ".lock.1.tmp"
        renewing.write_text("{}")  # the new worker's renewal under way
        remove_taken(taking.store, taken, folder)  # the end of the job's takeover (``retire``)
        assert (tmp_path / "sg" / "_workers" / "w1" / "lock.1").exists()  # the new worker's stays
        assert renewing.exists(), "a newer generation's write is not the gone worker's leftover"
        with pytest.raises(
            ConfigError, match=f"intake worker {folder} is in use by another running instance"
        ):
            IntakeWorker(cfg, "w1", echo=lambda line: None)._take_lease()
    finally:
        done.join()
        worker.lease.release()


def test_a_drain_waits_for_workers_where_it_found_only_ones_killed_or_stopped_before(tmp_path):
    """Leftovers of an earlier run (a worker killed, one stopped mid-run) are taken over, but a drain
    does not end on them: its workers may start after it (it ended at once, and they then waited for
    acks for ever). A worker that finished its own drain before the job looked does end it."""
    cfg, _, _, _, publisher = setup(tmp_path)
    gone_worker(cfg, "killed", held_for=60)
    stopped = {
        "host": socket.gethostname(),
        "pid": 1,
        "beat": time.time(),
        "released": True,
        "state": "stopped",
    }
    store_for(worker_dir(cfg.staging.dir, "stopped")).write("lock.0", orjson.dumps(stopped))
    publisher.reconcile()
    assert publisher.gone.keys() == {"killed", "stopped"} and not publisher.workers_done()
    drained = stopped | {"state": "drained"}
    store_for(worker_dir(cfg.staging.dir, "drained")).write("lock.0", orjson.dumps(drained))
    publisher._swept = 0.0  # a heartbeat later
    publisher.reconcile()
    assert "drained" in publisher.gone and publisher.workers_done()
