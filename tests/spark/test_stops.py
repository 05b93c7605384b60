"""How a job ends as production ends it: a stop to its process group, a stop with a staged backlog,
a driver killed with -9, another job on its checkpoint or its state (issue 42 items 1-3, issue 58)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from checkpoints.source_log import planned_files
from sources.fake.store import FakeQueue
from tests.support.jobconfig import files_sink
from tests.support.jobs import (
    body,
    job_config,
    read_jsonl_dir,
    read_until,
    run_cli,
    run_in_session,
    run_main_in_session,
    start_cli,
    summary,
    write_config,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.spark

STREAMING = {"mode": "processing_time", "interval": "200ms"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def _jvm_pid(checkpoint: Path) -> int:
    """The driver JVM the job launched, as it recorded it beside its checkpoint lock."""
    return int((checkpoint / "mq_ingest" / "jvm").read_text().split()[2])


def _stopped(proc, sig: int) -> str:
    """Send ``sig`` to the job's process group, as systemd, a container runtime or a terminal
    does, and return what it printed from then on."""
    try:
        os.killpg(proc.pid, sig)
        return proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_job_on_another_jobs_checkpoint_exits_2_naming_both(tmp_path, spark):
    """Same checkpoint and staging dir, another name, queue, state and sink: refused before it
    reads anything, and nothing tells the user to delete the other job's checkpoint."""
    qa = FakeQueue(str(tmp_path / "queues"), "qa")
    qa.send_batch([{"body": body(i)} for i in range(20)])
    joba = write_config(tmp_path, job_config(tmp_path, name="joba", source={"queue": "qa"}))
    code, out = run_in_session(joba)
    assert code == 0, out
    record = tmp_path / "checkpoint" / "mq_ingest" / "job.json"
    record.unlink(missing_ok=True)  # as the code before this record left a checkpoint
    qa.send_batch([{"body": body(i)} for i in range(20, 30)])
    code, out = run_in_session(joba)
    assert code == 0, out  # such a checkpoint keeps working, and is recorded now
    commits = sorted(os.listdir(tmp_path / "checkpoint" / "commits"))

    other = tmp_path / "c"
    other.mkdir()
    qb = FakeQueue(str(tmp_path / "queues"), "qb")
    qb.send_batch([{"body": body(i)} for i in range(10)])
    jobc = job_config(
        tmp_path,
        name="jobc",
        source={"queue": "qb"},
        state={"path": str(other / "state")},
        sinks=[files_sink(other)],
    )
    r = run_cli(write_config(other, jobc), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert errors[0].startswith(f"error: config key checkpoint: {tmp_path / 'checkpoint'} belongs to ")
    assert "job joba (sources: fake qa)" in errors[0] and "job jobc (sources: fake qb)" in errors[0]
    assert "remove" not in errors[0] and "delete" not in errors[0] and "copied or moved" not in errors[0]
    assert qb.count()["visible"] == 10 and qb.count()["in_flight"] == 0, "nothing was read"
    assert sorted(os.listdir(tmp_path / "checkpoint" / "commits")) == commits, "no batch of jobc in it"
    assert not (other / "out").exists() and not (other / "state").exists()
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(30))
    assert b'"joba"' in record.read_bytes()

    # Its own checkpoint, joba's state (issue 58, item 4): refused too, naming state.path.
    source = {"queue": "qb", "path": str(tmp_path / "queues")}
    jobd = job_config(other, name="jobd", source=source, state={"path": str(tmp_path / "state")})
    code, out, err = run_main_in_session(write_config(other, jobd))
    assert code == 2, out + err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: config key state.path: {tmp_path / 'state'} belongs to job joba (checkpoint "
    ), err
    assert qb.count()["visible"] == 10 and not (other / "checkpoint").exists(), "nothing was read"


def test_sigterm_to_the_process_group_lets_the_running_batch_finish(tmp_path):
    """``kill -TERM -- -PGID`` (systemd's stop, a container runtime's) while a batch runs: the
    JVM is not in that group, so the batch finishes, is acked, and the job exits 0; the JVM ends
    with the driver."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    slow = "SELECT *, reflect('java.lang.Thread', 'sleep', CAST(3000 AS BIGINT)) AS slept FROM source"
    proc = start_cli(write_config(tmp_path, job_config(tmp_path, trigger=STREAMING, transform=slow)))
    read_until(proc, lambda out: "streaming" in out)
    q.send(body(7))
    wait_for(lambda: (tmp_path / "checkpoint" / "offsets" / "0").exists(), 60, "batch 0 planned")
    out = _stopped(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert not [line for line in out.splitlines() if line.startswith("error:")], out
    assert summary(out)["writtenBySink"] == {"out": 1}
    assert [r["event_id"] for r in read_jsonl_dir(tmp_path / "out")] == [7]
    assert q.count()["total"] == 0
    jvm = _jvm_pid(tmp_path / "checkpoint")
    wait_for(lambda: not _alive(jvm), 30, f"the driver JVM (pid {jvm}) gone")


def test_a_driver_killed_with_9_takes_its_jvm_with_it(tmp_path):
    """The JVM in its own session is out of reach of a signal to the driver's group: it must still
    end when its driver dies (its stdin, a pipe from the driver, closes)."""
    proc = start_cli(write_config(tmp_path, job_config(tmp_path, trigger=STREAMING)), quiet=True)
    try:
        wait_for(lambda: (tmp_path / "checkpoint" / "mq_ingest" / "jvm").exists(), 120, "the JVM started")
        jvm = _jvm_pid(tmp_path / "checkpoint")
        assert _alive(jvm)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only
        proc.wait(timeout=30)
        wait_for(lambda: not _alive(jvm), 30, f"the orphaned driver JVM (pid {jvm}) gone")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_stop_runs_no_batch_after_the_running_one_and_gives_the_backlog_back(tmp_path, spark):
    """A staged backlog of many small files (one per trigger): a stop finishes the running batch,
    starts no other, and makes every message it received and did not write visible on its queue
    at once (not after its 300 s visibility timeout). Staged files no batch planned are gone; the
    next run reads each message once."""
    n = 2000
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(n)])
    staging = {"roll_messages": 100, "roll_interval": "200ms", "max_files_per_trigger": 1}
    cfg = job_config(tmp_path, trigger=STREAMING, staging=staging, source={"visibility_timeout": "300s"})
    proc = start_cli(write_config(tmp_path, cfg))
    out = read_until(proc, lambda out: "batch 1:" in out)
    out += _stopped(proc, signal.SIGINT)  # Ctrl-C in a terminal; SIGTERM stops the same way
    assert proc.returncode == 0, out
    after = out.split("signal 2: stopping after the running batch")[1]
    assert len(re.findall(r"^batch \d+:", after, re.MULTILINE)) <= 1, after
    written = [r["event_id"] for r in read_jsonl_dir(tmp_path / "out")]
    assert len(written) == len(set(written)) and len(written) < n
    count = q.count()
    assert count["in_flight"] == 0 and count["visible"] == n - len(written), count
    released = re.search(
        r"^stopped: (\d+) message\(s\) received but not written are back on their queues", after, re.M
    )
    assert released and 0 < int(released.group(1)) <= count["visible"], after
    staged = {str(p) for p in (tmp_path / "staging").glob("*.jsonl")}
    assert staged <= planned_files(str(tmp_path / "checkpoint")), "only files a batch planned are kept"

    code, again = run_in_session(
        write_config(tmp_path, {**cfg, "trigger": {"mode": "available_now", "idle_rounds": 1}})
    )
    assert code == 0, again
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(n))
    assert q.count()["total"] == 0
