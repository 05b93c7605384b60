"""Faults of the job's own machine, through the job: staging that fails for a while or for good,
an unwritable metrics file. Each asserts the books: every message once, the queue empty."""

from __future__ import annotations

import shutil
import threading
import time
import urllib.error
import urllib.request

import pytest

from ingest.config import parse_config
from ingest.errors import FatalError, redact
from ingest.intake.staging import TMP_DIR
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, read_jsonl_dir, run_cli, write_config
from tests.support.mounts import immutable
from tests.support.polling import wait_for

pytestmark = pytest.mark.spark
N = 300


def break_staging(tmp_path):
    """A real file-system fault (root ignores file modes): the temp folder becomes a plain file."""
    tmp = tmp_path / "staging" / TMP_DIR
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.write_text("not a folder")


def event_ids(tmp_path):
    return sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))


def healthz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_staging_unwritable_for_a_while_pauses_receiving_and_loses_nothing(tmp_path, spark, free_port):
    """Issue 52: the staging dir refusing new names (as a volume remounted read-only) stops
    intake; ``/healthz`` says so past the stall limit, and once the dir is writable again what
    was held goes to Spark and intake goes on."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    cfg = job_config(tmp_path, trigger={"mode": "processing_time", "interval": "500ms"})
    cfg["metrics"] |= {"port": free_port, "health_stall_limit": "1s"}
    job = Job(parse_config(cfg), echo=lambda s: None)
    runner = threading.Thread(target=job.run)
    runner.start()
    try:
        wait_for(job.running.is_set)
        q.send_batch([{"body": body(i)} for i in range(N)])
        wait_for(lambda: job.metrics.total("written") >= N)  # running: staged files went through _held/
        assert healthz(free_port) == (200, "ok\n")
        with immutable(tmp_path / "staging"):
            q.send_batch([{"body": body(i)} for i in range(N, N + 50)])  # one receive takes them
            # Received and written into _held/, but not published: both receivers pause.
            wait_for(lambda: job.stager.failing and job.stager.gate.messages == 50)
            wait_for(lambda: job.metrics.total("backpressurePauses") == 2)
            wait_for(lambda: healthz(free_port)[0] == 503, what="503 once intake paused past the stall limit")
            status, text = healthz(free_port)
            assert status == 503
            # redact() is process-wide: another test may have registered a secret that is in tmp_path.
            assert redact(f"intake paused (staging writes to {tmp_path / 'staging'} are failing: ") in text
            assert job.metrics.total("written") == N, "nothing more went to Spark"
        q.send_batch([{"body": body(i)} for i in range(N + 50, 2 * N + 50)])
        wait_for(lambda: job.metrics.total("written") >= 2 * N + 50, what="intake going on")
        wait_for(lambda: healthz(free_port) == (200, "ok\n"))
    finally:
        job.stop()
        runner.join()
    assert event_ids(tmp_path) == list(range(2 * N + 50))
    assert q.count()["total"] == 0


def test_staging_unwritable_for_good_exits_1_naming_the_dir_and_a_restart_finishes(tmp_path):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(N)])
    cfg = job_config(tmp_path, source={"visibility_timeout": "2s"})
    cfg["staging"]["give_up_after"] = "2s"
    (tmp_path / "staging").mkdir()
    break_staging(tmp_path)
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"staging dir {tmp_path / 'staging'}: cannot write staged files" in r.stderr
    assert q.count()["total"] == N, "nothing was deleted"
    (tmp_path / "staging" / TMP_DIR).unlink()
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert event_ids(tmp_path) == list(range(N))
    assert q.count()["total"] == 0


def test_an_unwritable_metrics_file_never_fails_a_batch(tmp_path):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(N)])
    (tmp_path / "a-file").write_text("")
    cfg = job_config(tmp_path)
    cfg["metrics"]["file"] = str(tmp_path / "a-file" / "metrics.prom")
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cannot write metrics.file" in r.stderr
    assert event_ids(tmp_path) == list(range(N))
    assert q.count()["total"] == 0


def test_a_failed_receiver_stops_the_job_within_a_second(tmp_path, spark):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    job = Job(parse_config(job_config(tmp_path, trigger={"mode": "processing_time"})), echo=lambda s: None)
    outcome: list[BaseException] = []

    def run():
        try:
            job.run()
        except BaseException as err:
            outcome.append(err)

    runner = threading.Thread(target=run)
    runner.start()
    wait_for(job.running.is_set)
    receiver = job.receivers.threads[0]
    receiver.fail(FatalError(f"receiver thread {receiver.name} failed: TypeError: boom"))
    started = time.monotonic()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert time.monotonic() - started < 5  # checked every 0.2 s; the rest is the shutdown
    assert outcome and "receiver thread receiver-src-0 failed" in str(outcome[0])
    assert q.count()["total"] == 0
