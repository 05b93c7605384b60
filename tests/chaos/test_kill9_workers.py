"""Chaos with intake workers (``intake.mode: workers``): three workers and the driver of one job, each a
process of its own, ``kill -9``-ed at random moments (a worker, the driver, both), restarted, then
drained: every id once in the sink, the queue empty with nothing in flight, every drain process's exit 0.
And a worker killed once it staged: the job deletes its committed messages itself.

The schedule is seeded (``CHAOS_SEED``, printed); the queue fills while the processes run, so each kill
finds work in every stage.
"""

from __future__ import annotations

import glob
import os
import random
import re
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
import yaml

from checkpoints.state import StateTable
from ingest.intake.owners import WORKERS as WORKERS_DIR
from ingest.intake.staged_files import HELD_DIR, TMP_DIR
from sources.fake.store import FakeQueue
from tests.support import jobconfig
from tests.support.jobs import body, job_config, metric, run_in_session
from tests.support.localstack_server import available
from tests.support.polling import wait_for
from tests.support.workers import DRIVER, Fleet, JobThread, fleet, pause

pytestmark = pytest.mark.chaos
HAVE_LOCALSTACK, WHY_NOT = available()
SEED = int(os.environ.get("CHAOS_SEED", "5"))
WORKERS = ["w1", "w2", "w3"]
INTAKE = {"mode": "workers", "heartbeat": 1, "stale_after": 15, "stop_timeout": 3}
"""No test here waits for a lease to go stale (a killed process's lease is free at once, by its pid):
``stale_after`` only has to outlast a loaded machine's stalls, or a worker fences itself (a clean run
with 4 of them had one go 4 s without a renewal and stop)."""
CONTINUOUS = {"mode": "processing_time", "interval": "500ms"}
LS_KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""LocalStack takes any key (this id maps to its account 000000000000)."""


class FakeFeed:
    """The fake queue ``in``, to be filled with ``n`` events, ``dups`` of them sent again under their
    message id (a queue's redelivery)."""

    def __init__(self, tmp: Path, n: int, dups: int = 0) -> None:
        self.q = FakeQueue(str(tmp / "queues"), "in")
        self.q.create()
        self.n, self.dups = n, dups
        self.ids: list[str] = []

    def send(self, start: int, stop: int) -> None:
        self.ids += self.q.send_batch([{"body": body(i)} for i in range(start, stop)])

    def resend(self) -> None:
        for i in range(self.dups):
            self.q.send(body(i), message_id=self.ids[i])

    def counts(self) -> tuple[int, int]:
        """(visible, in flight)."""
        c = self.q.count()
        return c["total"] - c["in_flight"], c["in_flight"]


class SqsFeed:
    """An SQS queue (LocalStack's) filled with ``n`` events; FIFO with ``groups`` groups if given."""

    def __init__(self, sqs, url: str, n: int, groups: int = 0) -> None:
        self.sqs, self.url, self.n, self.groups = sqs, url, n, groups
        self.ids: list[str] = []

    def send(self, start: int, stop: int) -> None:
        for first in range(start, stop, 10):
            entries = []
            for i in range(first, min(stop, first + 10)):
                entry = {"Id": str(i), "MessageBody": body(i)}
                if self.groups:
                    entry |= {"MessageGroupId": f"g{i % self.groups}", "MessageDeduplicationId": f"d{i}"}
                entries.append(entry)
            sent = self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            assert not sent.get("Failed"), sent
            self.ids += [m["MessageId"] for m in sent["Successful"]]

    def resend(self) -> None:
        pass  # SQS hands out the message ids: its repeats are its redeliveries

    def counts(self) -> tuple[int, int]:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=names)["Attributes"]
        return int(attrs[names[0]]), int(attrs[names[1]])


class Fill:
    """Sends ``feed.n`` events in chunks spread over ``seconds`` on a thread of its own, but the last
    ``held`` chunks: ``release`` sends one of them once the rest is sent, ``finish`` what is left and
    then the repeats. A driver restarted on a loaded machine may start after every event was sent
    and processed: with none left, its first batch, which the chaos waits for, never came."""

    def __init__(self, feed, seconds: float, held: int, chunk: int = 20) -> None:
        self.feed, self.chunk = feed, chunk
        starts = list(range(0, feed.n, chunk))
        cut = max(1, len(starts) - held)
        spread, self.held = starts[:cut], starts[cut:]
        pause = seconds / len(spread)

        def run() -> None:
            for start in spread:
                self._send(start)
                time.sleep(pause)

        self.thread = threading.Thread(target=run, name="fill", daemon=True)
        self.thread.start()

    def _send(self, start: int) -> None:
        self.feed.send(start, min(self.feed.n, start + self.chunk))

    def release(self) -> None:
        """Send a held chunk, in order, if the others are all sent (while they are not, events still come)."""
        if not self.thread.is_alive() and self.held:
            self._send(self.held.pop(0))

    def finish(self) -> None:
        self.thread.join()
        while self.held:
            self._send(self.held.pop(0))
        self.feed.resend()


def configs(tmp: Path, cfg: dict) -> tuple[Path, Path]:
    """The job's continuous config and its drain (``available_now``) twin, written under ``tmp``."""
    cfg = cfg | {"intake": INTAKE}
    continuous, drain = tmp / "continuous.yaml", tmp / "drain.yaml"
    continuous.write_text(yaml.safe_dump(cfg | {"trigger": CONTINUOUS}))
    drain.write_text(yaml.safe_dump(cfg | {"trigger": {"mode": "available_now", "idle_rounds": 1}}))
    return continuous, drain


def fake_job(tmp: Path, visibility: float = 3, **staging) -> dict:
    """The job on the fake queue: small receives, files and batches, so a kill finds some of each."""
    return job_config(
        tmp,
        source={"visibility_timeout": visibility, "batch_size": 25},
        staging={"roll_messages": 50, "roll_interval": "100ms", "max_files_per_trigger": 3} | staging,
    )


def chaos(procs: Fleet, continuous: Path, rng: random.Random, kills: list[str], fill: Fill) -> None:
    """Start the driver and the workers on ``continuous``; for each of ``kills`` (``worker``,
    ``driver``, ``both``) ``kill -9`` a random worker, the driver, or both, a random 0.5-5 s after the
    last kill (where the driver is hit: after its run committed a batch, so it dies with work both
    committed and not; ``fill`` sends a held chunk first, so that batch comes), and restart them but
    after the last kill. Then SIGTERM the workers left: each
    exits 0 (its wait for acks bounded by ``intake.stop_timeout``)."""
    procs.driver(continuous)
    for w in WORKERS:
        procs.worker(w, continuous)
    for n, what in enumerate(kills):
        victims = {"worker": [rng.choice(WORKERS)], "driver": [DRIVER]}.get(
            what, [DRIVER, rng.choice(WORKERS)]
        )
        if DRIVER in victims:
            fill.release()
            wait_for(lambda: re.search(r"^batch \d+: ", procs.log(DRIVER), re.M), 120, "a batch committed")
        after = rng.uniform(0.5, 5)
        pause(after, procs, [DRIVER, *WORKERS])
        print(f"kill -9 {' '.join(victims)} after {after:.1f}s")
        procs.kill9(*victims)
        if n < len(kills) - 1:
            for name in victims:
                procs.driver(continuous) if name == DRIVER else procs.worker(name, continuous)
    for w in procs.running():
        assert procs.stop(w) == 0, procs.tail(w)


def drain(procs: Fleet, feed, drain_cfg: Path, staging: Path) -> None:
    """Once nothing is in flight (the killed processes' messages visible again), drain: the driver first
    (in the suite's Spark session), then, once it has taken the killed and stopped workers over (their
    folders gone) and its query runs, three workers under their ids. Each must exit 0."""
    wait_for(lambda: feed.counts()[1] == 0, 60, "every message visible again", every=0.2)
    driver = JobThread(drain_cfg)
    try:
        wait_for(lambda: not list((staging / WORKERS_DIR).iterdir()), 60, "the workers taken over")
        wait_for(
            lambda: driver.job.running.is_set() or not driver.thread.is_alive(), 120, "the query running"
        )
        for w in WORKERS:
            procs.worker(w, drain_cfg)
        assert driver.code(180) == 0, "\n".join(driver.lines)
    finally:
        driver.close()
    for w in WORKERS:
        assert procs.wait(w, 60) == 0, procs.tail(w)


def sink_rows(out: Path) -> list[tuple[int, dict]]:
    """(batch id, row) of every committed row of a files sink, in batch order, then as written."""
    rows = []
    for d in sorted(glob.glob(str(out / "batch_id=*")), key=lambda p: int(p.rsplit("=", 1)[1])):
        if os.path.exists(os.path.join(d, "_SUCCESS")):
            for f in sorted(glob.glob(os.path.join(d, "part-*"))):
                with open(f, "rb") as fh:
                    rows += [(int(d.rsplit("=", 1)[1]), orjson.loads(line)) for line in fh if line.strip()]
    return rows


def assert_books(tmp: Path, feed, procs: Fleet, groups: int = 0) -> None:
    """Every event once in the sink (per group in send order), the queue empty, no failed delete logged."""
    rows = sink_rows(tmp / "out")
    got = sorted(r["event_id"] for _, r in rows)
    n = feed.n
    assert got == list(range(n)), (
        f"lost {sorted(set(range(n)) - set(got))}; doubled {len(got) - len(set(got))}"
    )
    for g in range(groups):
        seq = [(b, r["event_id"]) for b, r in rows if r["event_id"] % groups == g]
        assert [e for _, e in seq] == sorted(e for _, e in seq), f"group g{g} out of order: {seq}"
    assert feed.counts() == (0, 0), "messages left on the queue"
    prom = (tmp / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_failed_deletes_total") == 0
    logs = {p.name: p.read_text(errors="replace") for p in procs.logs.glob("*.log")}
    failed = {
        name: m.group(0) for name, text in logs.items() if (m := re.search(r".*deletes failed.*", text))
    }
    assert not failed, failed


def assert_state(tmp: Path, ids: list[str]) -> None:
    """Each message id once in the state table."""
    state = StateTable(str(tmp / "state"), "t-job", 86400)
    state.open()
    keys = state.keys()
    assert len(keys) == len(set(keys)) and set(keys) == set(ids)


def random_chaos(tmp: Path, feed, cfg: dict, kills: list[str], spread: float, groups: int = 0) -> None:
    """Fill the queue over ``spread`` seconds while the job runs through ``kills`` (each after a
    seeded random pause), drain it, and check the books."""
    rng = random.Random(SEED)
    print(f"CHAOS_SEED={SEED}")
    continuous, drain_cfg = configs(tmp, cfg)
    with fleet(tmp / "logs") as procs:
        filling = Fill(feed, spread, held=sum(kill != "worker" for kill in kills))
        chaos(procs, continuous, rng, kills, filling)
        filling.finish()
        drain(procs, feed, drain_cfg, Path(cfg["staging"]["dir"]))
    assert_books(tmp, feed, procs, groups)
    assert_state(tmp, feed.ids)


def test_kill9_workers_and_driver_at_random_moments_then_drain(tmp_path, spark):
    """The fake queue, with repeats: a worker killed (and restarted under its id), then the driver,
    then the driver and a worker at once."""
    feed = FakeFeed(tmp_path, 400, dups=10)
    random_chaos(tmp_path, feed, fake_job(tmp_path), ["worker", "driver", "both"], spread=25)


@pytest.fixture
def ls_sqs(localstack_url):
    import boto3

    client = boto3.client("sqs", endpoint_url=localstack_url, region_name="us-east-1", **LS_KEYS)
    yield client
    client.close()


@pytest.mark.integration
@pytest.mark.xdist_group("localstack")
@pytest.mark.skipif(not HAVE_LOCALSTACK, reason=WHY_NOT)
@pytest.mark.parametrize("groups", [0, 3], ids=["standard", "fifo"])
def test_kill9_workers_and_driver_on_localstack_sqs(tmp_path, spark, localstack_url, ls_sqs, groups):
    """One LocalStack SQS queue, standard or FIFO (each group's events reach the sink in send order):
    a worker killed and restarted, then the driver and a worker at once."""
    fifo = {"FifoQueue": "true"} if groups else {}
    name = f"chaos-{uuid.uuid4().hex[:10]}" + (".fifo" if groups else "")
    url = ls_sqs.create_queue(QueueName=name, Attributes=fifo)["QueueUrl"]
    try:
        static = {
            "sqs.credentials.provider": "static",
            "aws.access.key.id": "test",
            "aws.secret.access.key": "test",
        }
        source = jobconfig.sqs_source(url, localstack_url, visibility_timeout=3, **static)
        staging = {"roll_messages": 50, "roll_interval": "100ms", "max_files_per_trigger": 3}
        metrics = {"file": str(tmp_path / "metrics.prom")}
        cfg = jobconfig.job_config(source, tmp_path, staging=staging, metrics=metrics)
        feed = SqsFeed(ls_sqs, url, 150, groups)
        random_chaos(tmp_path, feed, cfg, ["worker", "both"], spread=12, groups=groups)
    finally:
        ls_sqs.delete_queue(QueueUrl=url)


def staged_lines(staging: Path, worker: str, held: bool = False) -> int:
    """Messages in ``worker``'s staged files: those Spark lists, or (``held``) those never published."""
    folder = staging / HELD_DIR if held else staging
    return sum(len(p.read_bytes().splitlines()) for p in folder.glob(f"{worker}~*.jsonl"))


def prom(tmp: Path) -> dict[str, float]:
    """The job's delete counters from its metrics file."""
    lines = (tmp / "metrics.prom").read_text().splitlines()
    names = ["deleted_messages", "failed_deletes", "stale_handles", "expired_handles"]
    return {name: metric(lines, f"mq_ingest_{name}_total") for name in names}


def test_a_worker_killed_once_its_batch_committed_has_its_messages_deleted_by_the_job(tmp_path, spark):
    """w1 stages every message, then the driver starts; w1 dies (``kill -9`` at ``before_ack``) as
    the job hands it the acks of the first batch. The job takes its lease over and deletes the
    messages itself, those acks and the later batches' alike, with the handles w1 staged: each
    counted once in deletedMessages, none in failedDeletes. They are hidden for 60 s and no other
    worker runs, so the queue can only be empty after the drain because the job deleted them."""
    feed = FakeFeed(tmp_path, 120)
    feed.send(0, feed.n)
    continuous, drain_cfg = configs(
        tmp_path, fake_job(tmp_path, visibility=60, roll_messages=20, max_files_per_trigger=2)
    )
    with fleet(tmp_path / "logs") as procs:
        procs.worker("w1", continuous, env={"MQ_INGEST_CRASH_AT": "before_ack"})
        staging = tmp_path / "staging"
        wait_for(lambda: staged_lines(staging, "w1") == feed.n, 60, "w1 staged every message")
        code, out = run_in_session(drain_cfg)
        assert code == 0, out
        assert procs.wait("w1", 10) == -9, procs.tail("w1")
    assert "batch 0: " in out and "batch 1: " in out  # some of w1's files committed after it died
    assert prom(tmp_path) == {
        "deleted_messages": 120,
        "failed_deletes": 0,
        "stale_handles": 0,
        "expired_handles": 0,
    }
    assert_books(tmp_path, feed, procs)
    assert not (staging / "_workers" / "w1").exists()


def test_a_killed_workers_messages_come_back_after_their_visibility_timeout(tmp_path, spark):
    """w1 dies (``kill -9`` at ``after_stage``) with a file still held; no driver runs. All its
    messages come back once their visibility ends (3 s): none was deleted. A drain with w2 reads
    w1's published files too: the job counts their handles expired (w1's leases lapsed) and sends
    no delete for them; w2 receives them again and deletes them. w1's held file is removed."""
    feed = FakeFeed(tmp_path, 100)
    feed.send(0, feed.n)
    continuous, drain_cfg = configs(tmp_path, fake_job(tmp_path))
    staging = tmp_path / "staging"
    with fleet(tmp_path / "logs") as procs:
        procs.worker(
            "w1", continuous, env={"MQ_INGEST_CRASH_AT": "after_stage", "MQ_INGEST_CRASH_AFTER": "2"}
        )
        assert procs.wait("w1", 60) == -9, procs.tail("w1")
        published = staged_lines(staging, "w1")
        assert published and staged_lines(staging, "w1", held=True), (
            "killed with one file published, one held"
        )
        wait_for(lambda: feed.counts() == (feed.n, 0), 30, "every message of w1 visible again", every=0.2)
        procs.worker("w2", drain_cfg)
        code, out = run_in_session(drain_cfg)
        assert code == 0, out
        assert procs.wait("w2", 60) == 0, procs.tail("w2")
    assert prom(tmp_path) == {
        "deleted_messages": 0,
        "failed_deletes": 0,
        "stale_handles": 0,
        "expired_handles": published,
    }
    assert_books(tmp_path, feed, procs)
    assert not [p.name for d in (HELD_DIR, TMP_DIR) for p in (staging / d).glob("w1~*")]
