"""The CLI as a user runs it: bad config exit code, SIGTERM graceful stop, the double-start lock."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import psutil
import pytest

from ingest.config import parse_config
from ingest.errors import ConfigError, IngestError
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobconfig import job_config as job_on
from tests.support.jobconfig import sqs_source
from tests.support.jobs import (
    body,
    job_config,
    read_jsonl_dir,
    read_until,
    rows_in_batch_lines,
    run_cli,
    start_cli,
    wait_all_visible,
    write_config,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.spark
SECRET_KEY = "spark.hadoop.fs.s3a.secret.key"


def test_invalid_config_exits_2_naming_the_key(tmp_path):
    cfg = job_config(tmp_path)
    cfg["staging"]["max_in_flight"] = 0
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 2
    assert "staging.max_in_flight" in r.stderr


def test_second_instance_on_the_same_checkpoint_refuses(tmp_path):
    first = Job(parse_config(job_config(tmp_path)), echo=lambda s: None)
    first.lock.acquire()
    second = Job(parse_config(job_config(tmp_path)), echo=lambda s: None)
    try:
        with pytest.raises(ConfigError, match=rf"in use by another running instance .*\(pid {os.getpid()}\)"):
            second.lock.acquire()
    finally:
        first.lock.release()
    second.lock.acquire()  # free again once the first let go
    second.lock.release()


def _command_lines() -> dict[int, str]:
    """Every process's command line this user can read (``ps`` shows the same)."""
    out = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            out[int(cmdline.parent.name)] = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return out


def test_sigterm_finishes_the_running_work_and_exits_0(tmp_path):
    """Also: a secret given in ``spark.conf`` through ``${env:…}`` is on no process's command
    line while the job runs; the driver JVM read it from a private file, removed once it started."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    secret = "s3a-secret-f81b0c2e"
    spark = {"master": "local[2]", "log_level": "ERROR", "conf": {SECRET_KEY: "${env:MQ_TEST_S3A_SECRET}"}}
    cfg = job_config(tmp_path, trigger={"mode": "processing_time", "interval": "500ms"}, spark=spark)
    path = write_config(tmp_path, cfg)
    proc = start_cli(path, env={"MQ_TEST_S3A_SECRET": secret})
    try:
        read_until(proc, lambda out: "streaming" in out)
        lines = _command_lines()
        assert [pid for pid, line in lines.items() if secret in line] == []
        # The CLI's own child: a process the JVM forks (Hadoop's Shell runs chmod so) shows the
        # JVM's command line until it execs.
        children = psutil.Process(proc.pid).children()
        [jvm] = [c for c in children if "SparkSubmit" in lines.get(c.pid, "")]
        args = lines[jvm.pid].split()
        assert not Path(args[args.index("--properties-file") + 1]).exists(), "removed once the JVM started"
        q.send_batch([{"body": body(i)} for i in range(100)])
        # A stop gives back what no batch has read yet (test_stops.py): here all were read.
        seen = read_until(proc, lambda out: rows_in_batch_lines(out) >= 100)
        proc.send_signal(signal.SIGTERM)
        out = seen + proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    assert "stopping after the running batch" in out
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(100))
    assert q.count()["total"] == 0


def test_ctrl_c_stops_as_sigterm_does_and_a_second_one_aborts(tmp_path):
    """SIGINT to the job's process group, as a terminal's Ctrl-C sends it (the JVM ignores it)."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    cfg = job_config(tmp_path, trigger={"mode": "processing_time", "interval": "500ms"})
    proc = start_cli(write_config(tmp_path, cfg))
    try:
        read_until(proc, lambda out: "streaming" in out)
        q.send_batch([{"body": body(i)} for i in range(100)])
        wait_for(lambda: not q.count()["visible"], 60, "every message received")
        # A stop gives back what no batch has read yet (test_stops.py): here all were read.
        seen = read_until(proc, lambda out: rows_in_batch_lines(out) >= 100)
        os.killpg(proc.pid, signal.SIGINT)
        out = seen + proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    assert "stopping after the running batch" in out and "KeyboardInterrupt" not in out
    assert "summary: received=100" in out
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(100))
    assert q.count()["total"] == 0

    # A batch that takes a minute: the second Ctrl-C comes while the first stop still waits for it.
    slow = "SELECT *, reflect('java.lang.Thread', 'sleep', CAST(60000 AS BIGINT)) AS slept FROM source"
    proc = start_cli(write_config(tmp_path, {**cfg, "transform": slow}))
    try:
        for line in proc.stdout:
            if "streaming" in line:
                break
        q.send(body(100))
        wait_for(lambda: not q.count()["visible"], 60, "the message received")
        os.killpg(proc.pid, signal.SIGINT)
        for line in proc.stdout:
            if "stopping after the running batch" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            print(proc.communicate()[0])
    assert proc.returncode == 130, rest
    assert q.count()["total"] == 1, "aborted: the message stays on its queue"
    # One line says how many messages the abort leaves unacked and when they come back.
    aborts = [line for line in rest.splitlines() if line.startswith("abort:")]
    assert len(aborts) == 1, rest
    back = re.fullmatch(
        r"abort: 1 message\(s\) received and not acked stay on their queues; they come back within "
        r"(\d+)s \(their visibility timeout\) and the next run drops those already written as duplicates",
        aborts[0],
    )
    assert back and 0 < int(back.group(1)) <= 30, aborts[0]  # the source's visibility_timeout: 30s
    assert q.count()["in_flight"] == 1, "not released: back after its visibility timeout, as the line says"


def test_check_validates_the_whole_job_without_touching_queue_sink_or_state(tmp_path, spark, capsys):
    from ingest.run import main

    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send(body(1))
    cfg = job_config(tmp_path, transform="SELECT event_id, _meta.message_id AS id FROM source")
    r = run_cli(["--config", str(write_config(tmp_path, cfg)), "--check"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok: job t-job is valid; sink out receives columns ['event_id', 'id']" in r.stdout
    # each sink's guarantee, as its config class declares it (SinkDelivery)
    assert "sink out (files): exactly-once, idempotent per batch: a replayed batch leaves" in r.stdout
    assert q.count()["total"] == 1 and q.count()["visible"] == 1, "the queue was not touched"
    for untouched in ("checkpoint", "state", "staging", "out"):
        assert not (tmp_path / untouched).exists(), untouched
    for bad, key in (
        ({"transform": "SELECT no_such_column FROM source"}, "config key transform:"),
        ({"schema": "event_id BIGIN"}, "config key schema: invalid Spark DDL"),
        (
            {"state": {"path": str(tmp_path / "state"), "dedup_key": "nosuchcol +"}},
            "config key state.dedup_key:",
        ),
        (
            {"state": {"path": str(tmp_path / "state"), "dedup_key": "nosuchcol"}},
            "config key state.dedup_key:",
        ),
    ):
        # In this process, in the suite's session (check leaves a running session running): the
        # same main() the CLI runs, without a JVM start for each case.
        path = write_config(tmp_path, job_config(tmp_path, **bad))
        assert main(["--config", str(path), "--check"]) == 2
        assert key in capsys.readouterr().err
    # A workers job (intake.mode: workers) receives nothing itself: the check says what starts its intake.
    path = write_config(tmp_path, job_config(tmp_path, intake={"mode": "workers"}))
    assert main(["--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert (
        "intake.mode is workers: the job runs no receivers; start intake workers with "
        f"`mq-ingest intake --config {path}` on nodes that reach staging.dir {tmp_path / 'staging'}"
    ) in out.splitlines()
    assert not spark.sparkContext._jsc.sc().isStopped(), "check stopped a session it did not start"


def test_a_bad_body_under_the_default_policy_stops_the_job_and_stays_on_its_queue(tmp_path):
    """No ``on_bad_message`` and no dead-letter target: bad input stops the job, nothing vanishes."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    good = q.send_batch([{"body": body(i)} for i in range(5)])
    bad = q.send("not json")
    cfg = job_config(tmp_path)
    del cfg["sources"][0]["on_bad_message"]
    r = run_cli(write_config(tmp_path, cfg))
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert errors, r.stderr[-3000:]
    assert f"message {bad} from source src" in errors[-1] and "cannot be decoded" in errors[-1]
    assert "sources.src.on_bad_message is fail" in errors[-1]
    assert read_jsonl_dir(tmp_path / "out") == [], "the batch stopped before any sink saw it"
    wait_all_visible(q)  # released by the stop, or back after its visibility timeout
    assert sorted(m.message_id for m in q.peek(100)) == sorted([*good, bad])


def test_check_builds_the_sources_and_sinks_the_run_builds(tmp_path):
    """A datagen field that is not a column is found when the source is built, not by the schema."""
    gen = {"type": "datagen", "name": "gen", "number-of-rows": 5, "fields": {"nope": {"kind": "random"}}}
    r = run_cli(["--config", str(write_config(tmp_path, job_config(tmp_path, sources=[gen]))), "--check"])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "error: sources.gen.fields: ['nope'] are not columns of the schema" in r.stderr


def unreachable_source(kind: str, port: int) -> tuple[dict, str]:
    """A source of ``kind`` whose endpoint is 127.0.0.1:``port`` (closed), one retry; and its endpoint."""
    endpoint = f"http://127.0.0.1:{port}"
    if kind == "sqs":
        return sqs_source(f"{endpoint}/000000000000/gone", endpoint, **{"sqs.max.retries": 1}), endpoint
    keys = {"accessKeyId": "id", "accessKeySecret": "not-a-real-secret"}
    return {
        "type": "mns",
        "name": "src",
        "endpoint": endpoint,
        "queueName": "gone",
        "max_retries": 1,
    } | keys, endpoint


@pytest.mark.parametrize("kind", ["sqs", "mns"])
def test_a_drain_whose_queue_cannot_be_reached_at_start_exits_1_naming_the_endpoint(
    tmp_path, free_port, kind
):
    """Retried as the source's calls are, then one error line; nothing staged, the lock let go.

    A streaming job only warns (its queue may come back; tests/integration/test_queue_outage.py).
    """
    source, endpoint = unreachable_source(kind, free_port)
    cfg = job_on(source, tmp_path)
    config = write_config(tmp_path, cfg)
    for run in ("first", "second"):  # the second finds the checkpoint free, and the same error
        r = run_cli(config, timeout=120)
        errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
        assert r.returncode == 1 and len(errors) == 1, f"{run} run: {r.stdout[-2000:]}{r.stderr[-3000:]}"
        assert errors[0].startswith(f"error: source src: cannot reach {kind.upper()} queue "), errors[0]
        assert f" at {endpoint} " in errors[0] and "not-a-real-secret" not in r.stderr
    staged = [p for p in (tmp_path / "staging").rglob("*") if p.is_file()]
    assert staged == [], "nothing received, nothing staged"
    job = Job(parse_config(cfg), echo=lambda s: None)
    with pytest.raises(IngestError, match=f"^source src: cannot reach {kind.upper()} queue "):
        job.run()
    job.lock.acquire()  # this process's own failed run let the lock go
    job.lock.release()


def test_a_bogus_log_level_exits_2(tmp_path):
    r = run_cli(["--config", "x.yaml", "--log-level", "BOGUS"], timeout=60)
    assert r.returncode == 2 and "--log-level" in r.stderr and "BOGUS" in r.stderr


def test_a_transform_that_cannot_be_analysed_exits_2_and_acks_nothing(tmp_path):
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(5)])
    r = run_cli(write_config(tmp_path, job_config(tmp_path, transform="SELECT no_such_column FROM source")))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "config key transform:" in r.stderr and "no_such_column" in r.stderr
    assert q.count()["total"] == 5


def test_the_console_shows_the_job_not_sparks_start_up_notices(tmp_path):
    """At the default log level (WARN) a run prints its own lines; Spark's start-up notices, the
    query plan and per-batch warnings are gone (the plan is in the start log and at DEBUG)."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(50)])
    cfg = job_config(tmp_path, spark={"master": "local[2]", "log_level": "WARN"})
    done = run_cli(write_config(tmp_path, cfg))
    assert done.returncode == 0, done.stderr[-3000:]
    console = done.stdout + done.stderr
    assert "batch 0: rows=50" in console and "summary: received=50" in console
    for noise in (
        "log4j",
        "setLogLevel",
        "NativeCodeLoader",
        "query plan",
        "ResolveWriteToStream",
        "Truncated",
    ):
        assert noise not in console, noise


def test_a_second_run_starts_quietly_and_spark_deletes_the_last_runs_staged_files(tmp_path):
    """A restart keeps the last committed batch's staged files for Spark: it lists them when the
    query starts, then ``cleanSource`` deletes them. Removed by the job before, each one cost a
    FileNotFoundException warning with its stack trace on every restart."""
    q = FakeQueue(str(tmp_path / "queues"), "in")
    q.send_batch([{"body": body(i)} for i in range(50)])
    config = write_config(tmp_path, job_config(tmp_path, spark={"master": "local[2]", "log_level": "WARN"}))
    first = run_cli(config)
    assert first.returncode == 0, first.stderr[-3000:]
    staging = tmp_path / "staging"
    left = {p.name for p in staging.glob("*.jsonl")}
    assert left, "Spark deletes a batch's files when it plans the next batch: the last one's stay"

    q.send_batch([{"body": body(i)} for i in range(50, 80)])
    second = run_cli(config)
    assert second.returncode == 0, second.stderr[-3000:]
    console = second.stdout + second.stderr
    assert "summary: received=30" in console
    for noise in ("FileNotFoundException", "Failed to remove", "Assume no metadata", "was not found"):
        assert noise not in console, noise
    assert not left & {p.name for p in staging.glob("*.jsonl")}, "cleanSource deleted them"
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(80))
    assert q.count()["total"] == 0
