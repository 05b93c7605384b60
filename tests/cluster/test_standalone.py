"""mq-ingest on a Spark standalone cluster: jobs submitted with the bundle by spark-submit.

Receivers run in the driver (the spark-submit process's Python); the files and fake sinks
write from the executor, which runs the packed venv and the zipped project. Staging,
checkpoint, state and outputs sit in the test's tmp dir, which driver and worker share. A run
that follows a cluster run on its checkpoint (the next run, the restart) is the CLI's, in a
local session: what it checks is what the checkpoint, state and queue carry over, and each
spark-submit unpacks the ~280 MB env archive on the driver and on the executor (~60 s here).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import psutil
import pytest
import yaml

from sources.fake.store import FakeQueue
from tests.support import jobconfig
from tests.support.cluster import DeletesUnavailable, stop_session
from tests.support.jobconfig import job_config
from tests.support.jobs import body, read_jsonl_dir, run_cli, summary
from tests.support.polling import wait_for
from tests.support.sqs_server import send_bodies

# One worker under xdist: the module's cluster (a master and a worker JVM) and the bundle cached
# in pytest's cache dir are made once, not once per worker.
pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("cluster")]


def job(tmp: Path, sources: list[dict], name: str = "job.yaml", **over) -> Path:
    """A job YAML on ``tmp``; ``spark.master`` empty so spark-submit's ``--master`` is used."""
    cfg = job_config(
        sources, tmp, name="cluster-job", **({"spark": {"master": "", "log_level": "WARN"}} | over)
    )
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def fake_source(tmp: Path, **over) -> dict:
    """The fake-queue source on ``tmp/queues``, named ``fake``."""
    return jobconfig.fake_source(tmp, name="fake", **over)


def sqs_source(url: str, endpoint: str, **over) -> dict:
    """The SQS source, named ``sqs``."""
    return jobconfig.sqs_source(url, endpoint, name="sqs", **({"visibility_timeout": "30s"} | over))


def sqs_depth(sqs, url: str) -> int:
    """Messages on the queue, visible or in flight."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


def event_ids(tmp: Path) -> list[int]:
    return sorted(r["event_id"] for r in read_jsonl_dir(tmp / "out"))


def test_bundle_ships_the_runtime_env_and_the_code_not_the_editable_install(spark_bundle):
    with tarfile.open(spark_bundle.env_archive) as tar:
        names = tar.getnames()
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages/"
    tops = {n[len(site) :].split("/")[0] for n in names if n.startswith(site)}
    assert {"pyspark", "boto3", "orjson", "pydantic", "deltalake"} <= tops
    assert "bin/python" in names and "pyvenv.cfg" in names
    assert not any("__editable__" in t or t.startswith("mq_ingest") for t in tops), "editable hook packed"
    assert not {"ingest", "sinks", "sources", "checkpoints"} & tops
    assert not {"pytest", "moto", "ruff", "venv_pack", "pip"} & tops, "dev tools packed"
    assert not any(n.startswith(site + "pyspark/jars/") for n in names)
    with zipfile.ZipFile(spark_bundle.code_zip) as zf:
        code = set(zf.namelist())
    assert {
        "ingest/run.py",
        "ingest/pipeline.py",
        "sinks/fake/sink.py",
        "sources/sqs/source.py",
        "checkpoints/state.py",
    } <= code
    assert not any(n.endswith(".pyc") for n in code)


def test_drain_moves_fake_and_sqs_messages_through_executors_exactly_once(
    tmp_path, cluster, spark_bundle, sqs, make_queue, moto_url
):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    ids = q.send_batch([{"body": body(i)} for i in range(300)])
    for i in range(10):  # redeliveries of the same message id
        q.send(body(i), message_id=ids[i])
    q.send_batch([{"body": "not json"}, {"body": '{"event_id": '}])
    url = make_queue()
    send_bodies(sqs, url, [body(1000 + i) for i in range(60)])
    copy = {"type": "fake", "name": "copy", "path": str(tmp_path / "queues"), "queue": "copy"}
    config = job(
        tmp_path,
        [fake_source(tmp_path), sqs_source(url, moto_url)],
        sinks=[{"type": "files", "name": "out", "path": str(tmp_path / "out"), "format": "jsonl"}, copy],
    )
    code, out = cluster.run(spark_bundle, config, tmp_path / "submit.log")
    assert code == 0, out[-6000:] + cluster.log_text()
    # Under spark-submit the Spark UI is on, bound as Spark binds it, its address in the start log.
    assert re.search(r"INFO ingest\.runtime\.spark: Spark UI at http://[^\s:]+:40[4-5]\d ", out), out[-6000:]

    rows = read_jsonl_dir(tmp_path / "out")
    assert sorted(r["event_id"] for r in rows) == list(range(300)) + list(range(1000, 1060))
    message_ids = [r["_meta"]["message_id"] for r in rows]
    assert len(message_ids) == len(set(message_ids)) == 360
    assert sum(r["_meta"]["source"] == "sqs" for r in rows) == 60
    # the fake sink ran Python on the executor: the packed env with the zipped project
    assert FakeQueue(str(tmp_path / "queues"), "copy").count()["total"] == 360
    s = summary(out)
    assert s["deserializationErrors"] == 2
    # received counts every delivery. A lease the keeper could not extend in time (load ~12 once:
    # received 373, deleted 372, nothing failed) is not deleted with its lapsed handle; its message
    # comes back, is dropped as a duplicate and deleted. expiredHandles counts that handle, so the
    # books balance: each delivery deleted or expired, and each expired one came back once more.
    assert s["duplicateMessages"] >= 10 + s["expiredHandles"], out[-6000:]
    assert s["deletedMessages"] + s["expiredHandles"] == s["received"], out[-6000:]
    assert s["failedDeletes"] == 0, out[-6000:]
    assert q.count()["total"] == 0
    assert sqs_depth(sqs, url) == 0
    assert any((d / "environment" / "pyvenv.cfg").exists() for d in cluster.app_dirs()), "no executor env"


def test_drain_exits_nonzero_when_acks_fail_and_the_next_run_acks(
    tmp_path, cluster, spark_bundle, sqs, make_queue, moto_url
):
    url = make_queue()
    send_bodies(sqs, url, [body(i) for i in range(60)])
    with DeletesUnavailable(moto_url) as proxy:
        config = job(tmp_path, [sqs_source(url, proxy.url, visibility_timeout="10s")])
        first, out = cluster.run(spark_bundle, config, tmp_path / "first.log")
    assert first == 3, out[-6000:]  # not everything acked: the exit code says so
    assert "NOT ACKED: 60 message(s) of committed batches could not be deleted" in out, out[-6000:]
    assert proxy.denied > 0 and "ServiceUnavailable" in out, out[-6000:]
    assert summary(out)["failedDeletes"] >= 60  # more if some came back before the run ended
    assert event_ids(tmp_path) == list(range(60))  # written once, not deleted
    assert sqs_depth(sqs, url) == 60

    visible = ["ApproximateNumberOfMessages"]
    wait_for(
        lambda: (
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=visible)["Attributes"][visible[0]] == "60"
        ),
        60,
        "the refused messages never came back",
    )
    # One receiver: moto now and then hands a message to two concurrent receivers (DESIGN.md),
    # which would make the exact counts below count that copy too.
    config = job(tmp_path, [sqs_source(url, moto_url, visibility_timeout="10s", receivers=1)])
    # The next run is the CLI's (a local session, spark.master ''): dropping the copies the
    # committed state already holds and deleting them is the driver's work, the same however the
    # job is launched, and a second spark-submit costs ~60 s more (the env archive is unpacked
    # on the driver and again on the executor). The cluster's own part, exit code 3 through
    # spark-submit, is the first run's.
    again = run_cli(config, timeout=300)
    code, out = again.returncode, again.stdout + again.stderr
    assert code == 0, out[-6000:]
    s = summary(out)
    assert s["duplicateMessages"] == 60 and s["deletedMessages"] == 60 and s["failedDeletes"] == 0
    assert event_ids(tmp_path) == list(range(60))  # nothing doubled by the redelivery
    assert sqs_depth(sqs, url) == 0


def driver_pid(proc: subprocess.Popen, checkpoint: Path, timeout: float = 120) -> int:
    """The Python driver under spark-submit's JVM, once it holds the checkpoint lock."""
    lock = checkpoint / "mq_ingest" / "lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        if text.isdigit():
            pid = int(text)
            children = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
            assert pid in children, f"lock holder {pid} is not under spark-submit {proc.pid}"
            return pid
        assert proc.poll() is None, f"spark-submit exited with {proc.returncode}"
        time.sleep(0.2)
    raise TimeoutError("the driver never took the checkpoint lock")


def test_sigterm_stops_gracefully_a_second_instance_is_refused_and_a_restart_drains(
    tmp_path, cluster, spark_bundle
):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(200)])
    src = fake_source(tmp_path, visibility_timeout="20s")
    # backpressure keeps most of the second burst on the queue when the stop comes
    staging = {"dir": str(tmp_path / "staging"), "roll_messages": 100, "max_in_flight": 100}
    stream = job(tmp_path, [src], staging=staging, trigger={"mode": "processing_time", "interval": "1s"})
    log = tmp_path / "stream.log"
    proc = cluster.submit(spark_bundle, stream, log)
    try:
        pid = driver_pid(proc, tmp_path / "checkpoint")
        wait_for(lambda: len(read_jsonl_dir(tmp_path / "out")) >= 200, 240, "first batch never written")

        # The double-start lock: a second instance on the same checkpoint refuses at once. It is
        # started by the CLI, not a second spark-submit (~20 s): the lock is the checkpoint's,
        # taken before any Spark session, however the job was launched.
        done = run_cli(stream, timeout=120)
        second = done.stdout + done.stderr
        assert done.returncode not in (0, None), second[-4000:]
        assert f"is in use by another running instance of this job (pid {pid})" in second, second[-4000:]

        # more messages; SIGTERM the driver while they are being received and processed
        q.send_batch([{"body": body(i)} for i in range(200, 600)])
        wait_for(lambda: q.count()["in_flight"] > 0, 60, "nothing received after the second send")
        os.kill(pid, signal.SIGTERM)
        proc.wait(180)
    finally:
        stop_session(proc)
    out = log.read_text(errors="replace")
    assert proc.returncode == 0, out[-6000:]
    assert "stopping after the running batch" in out
    got = event_ids(tmp_path)
    assert len(got) == len(set(got)), "a message written twice"
    assert set(got) <= set(range(600)) and set(range(200)) <= set(got)
    left = q.count()
    assert left["in_flight"] == 0 and left["total"] == 600 - len(got), (left, len(got))  # nothing lost

    # The restart is the CLI's (a local session, spark.master ''), on the checkpoint, state and
    # queue the cluster run left: what it proves (it carries on from the stopped run, nothing lost
    # or doubled) is the checkpoint's and the driver's, and a second spark-submit costs ~60 s more
    # (the env archive unpacked on the driver and again on the executor).
    drain = job(tmp_path, [src], name="drain.yaml", staging=staging)
    restart = run_cli(drain, timeout=300)
    assert restart.returncode == 0, (restart.stdout + restart.stderr)[-6000:]
    assert event_ids(tmp_path) == list(range(600))
    assert q.count()["total"] == 0
