"""SQS → Spark → SQS end to end on moto: the CLI on a YAML job, FIFO group order, and kill -9 + restart."""

from __future__ import annotations

import signal
import time

import orjson
import pytest

from ingest.config import parse_config
from ingest.pipeline import Job
from tests.support import jobconfig
from tests.support.jobs import body, job_config, metric, read_jsonl_dir, run_cli, run_in_session, write_config
from tests.support.sqs_server import drain, send_bodies, wait_all_visible

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def sqs_source(url: str, moto_url: str, **options) -> dict:
    return jobconfig.sqs_source(
        url, moto_url, **({"visibility_timeout": 20, "on_bad_message": "skip"} | options)
    )


def sqs_sink(url: str, moto_url: str) -> dict:
    return {"type": "sqs", "name": "out", "sqsUrl": url, "aws.endpoint": moto_url}


def test_cli_moves_every_message_once_and_empties_the_source(tmp_path, sqs, make_queue, moto_url):
    src, dst = make_queue(), make_queue()
    send_bodies(sqs, src, [body(i) for i in range(60)] + ["{broken"])
    cfg = job_config(tmp_path, sinks=[sqs_sink(dst, moto_url)])
    cfg["sources"] = [sqs_source(src, moto_url)]
    assert cfg["trigger"]["mode"] == "available_now"
    done = run_cli(write_config(tmp_path, cfg))
    assert done.returncode == 0, done.stdout + done.stderr
    out = [orjson.loads(b) for b in drain(sqs, dst)]
    assert sorted(r["event_id"] for r in out) == list(range(60))  # each once
    assert "_meta" not in out[0]
    assert drain(sqs, src) == []  # the broken body too: skipped, counted, deleted
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_deserialization_errors_total") == 1
    # moto rarely delivers a message twice to concurrent receivers: dropped, and deleted too
    duplicates = metric(prom, "mq_ingest_duplicate_messages_total")
    assert metric(prom, "mq_ingest_deleted_messages_total") == 61 + duplicates


def test_fifo_to_fifo_keeps_group_order(tmp_path, spark, sqs, make_queue, moto_url):
    src, dst = make_queue(fifo=True), make_queue(fifo=True)
    send_bodies(sqs, src, [body(i) for i in range(30)], group=lambda i: f"g{i % 3}")
    cfg = job_config(tmp_path, sinks=[sqs_sink(dst, moto_url)])
    # Short polls: moto spins a long poll on a FIFO queue whose visible messages are all in
    # locked groups, in this process, starving the job's own thread (41 s instead of ~10 s).
    # They also ask again soon after each ack: a drain that counted an empty receive racing the
    # last deletes (groups still locked) stopped here with 20 of the 30 messages left.
    cfg["sources"] = [sqs_source(src, moto_url, receivers=1, **{"sqs.waittime.seconds": 0})]
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0
    got = [
        (m["Attributes"]["MessageGroupId"], orjson.loads(m["Body"])["event_id"])
        for m in drain(sqs, dst, attributes=True)
    ]
    assert sorted(e for _, e in got) == list(range(30))
    for g in ("g0", "g1", "g2"):
        ids = [e for grp, e in got if grp == g]
        assert ids == sorted(ids), f"group {g} out of order: {ids}"


@pytest.mark.chaos
def test_kill9_after_sink_then_restart_loses_nothing(tmp_path, spark, sqs, make_queue, moto_url):
    src = make_queue()
    send_bodies(sqs, src, [body(i) for i in range(120)])
    cfg = job_config(
        tmp_path, staging={"dir": str(tmp_path / "staging"), "roll_messages": 20, "max_files_per_trigger": 2}
    )
    cfg["sources"] = [sqs_source(src, moto_url, visibility_timeout=3)]
    path = write_config(tmp_path, cfg)
    crashed = run_cli(path, env={"MQ_INGEST_CRASH_AT": "after_sink", "MQ_INGEST_CRASH_AFTER": "2"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    wait_all_visible(sqs, src)  # the crashed run's in-flight messages come back
    code, again = run_in_session(path)  # the restart, in the suite's Spark session
    assert code == 0, again
    # The queue first: a message still on it means the drain ended before writing it; one in
    # neither the queue nor the sink was deleted without being written (a loss).
    written = sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))
    left = sorted(orjson.loads(b)["event_id"] for b in drain(sqs, src))
    assert left == [], (
        f"the drain ended with {left} still on the queue (the sink holds {len(written)})\n{again}"
    )
    assert written == list(range(120)), f"deleted, never written: {sorted(set(range(120)) - set(written))}"


def test_one_delivery_handed_out_twice_is_written_once_and_deleted(
    tmp_path, spark, sqs, make_queue, moto_url
):
    """moto now and then hands one delivery, with one receipt handle, to two concurrent receivers
    (its receive is not atomic): the kill -9 test once lost event 63 so. One copy is a repeat and
    is dropped; the other must still be written, or the message is committed, deleted and lost."""
    from tests.support.sqs_server import FaultProxy

    src = make_queue()
    send_bodies(sqs, src, [body(i) for i in range(10)])
    with FaultProxy(moto_url) as proxy:
        proxy.repeat = 1
        cfg = job_config(tmp_path)
        cfg["sources"] = [sqs_source(src, proxy.url, receivers=1)]
        assert Job(parse_config(cfg), echo=lambda s: None).run() == 0
        assert proxy.repeat == 0, "no reply carried a message twice"
    left = sorted(orjson.loads(b)["event_id"] for b in drain(sqs, src))
    assert left == []
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(10))
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_duplicate_messages_total") == 1
    assert metric(prom, "mq_ingest_deleted_messages_total") == 11  # per row received, as the CLI test counts


def test_a_delete_denied_during_the_run_stops_the_job_naming_queue_and_permission(
    tmp_path, spark, sqs, make_queue, moto_url
):
    """The start-up probe passes; then DeleteMessageBatch is refused (a policy changed under the
    job): the job stops with the queue and the permission, instead of failing every delete."""
    from ingest.errors import FatalError
    from tests.support.sqs_server import FaultProxy

    src = make_queue()
    send_bodies(sqs, src, [body(i) for i in range(20)])
    with FaultProxy(moto_url) as proxy:
        proxy.deny = {"DeleteMessageBatch"}
        cfg = job_config(tmp_path)
        cfg["sources"] = [sqs_source(src, proxy.url, receivers=1)]
        job = Job(parse_config(cfg), echo=lambda s: None)
        with pytest.raises(FatalError) as err:
            job.run()
        assert proxy.actions("DeleteMessage"), "the start-up probe ran"
    text = str(err.value)
    assert "source src" in text and src in text and "DeleteMessageBatch" in text and "AccessDenied" in text
    # The batch whose deletes were refused is written; one running when the job stopped may have
    # been cancelled (on a loaded machine it was): uncommitted, it is written by the next run.
    rows = sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out"))
    assert rows and len(rows) == len(set(rows)) and set(rows) <= set(range(20)), rows
    wait_all_visible(sqs, src)
    assert len(drain(sqs, src)) == 20  # nothing was deleted: the next run drops them as duplicates


def receive_distinct(sqs, url: str, n: int, timeout: float = 30) -> dict[str, str]:
    """Receive ``n`` distinct messages (hidden for 60 s); message id → receipt handle."""
    taken: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while len(taken) < n:
        assert time.monotonic() < deadline, f"{n} messages not received within {timeout:.0f}s"
        resp = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=min(10, n - len(taken)), VisibilityTimeout=60
        )
        taken |= {m["MessageId"]: m["ReceiptHandle"] for m in resp.get("Messages", [])}
    return taken


def test_metrics_after_a_run_with_redeliveries(tmp_path, spark, sqs, make_queue, moto_url):
    """The Prometheus file after a drain: redeliveries, the final queue depth and ack latency."""
    src = make_queue()
    send_bodies(sqs, src, [body(i) for i in range(60)])
    taken = receive_distinct(sqs, src, 20)
    entries = [
        {"Id": str(k), "ReceiptHandle": h, "VisibilityTimeout": 0} for k, h in enumerate(taken.values())
    ]
    for start in range(0, 20, 10):  # visible again at once: the job receives them a second time
        sqs.change_message_visibility_batch(QueueUrl=src, Entries=entries[start : start + 10])
    cfg = job_config(tmp_path)
    # One receiver (moto now and then hands a message to two), at most 10 messages in flight (so
    # the queue is not empty when the first depth is read), and no periodic depth after that one.
    cfg["sources"] = [sqs_source(src, moto_url, receivers=1, max_outstanding_messages=10)]
    cfg["metrics"] |= {"queue_depth_interval": "1h"}
    cfg["trigger"] |= {"progress_interval": 0}
    assert Job(parse_config(cfg), echo=lambda s: None).run() == 0
    prom = (tmp_path / "metrics.prom").read_text().splitlines()
    assert metric(prom, "mq_ingest_redelivered_messages_total") == 20
    counts = [metric(prom, f"mq_ingest_{k}_total") for k in ("received", "staged", "deleted_messages")]
    assert counts == [60, 60, 60]
    assert metric(prom, "mq_ingest_duplicate_messages_total") == 0
    assert [line for line in prom if line.startswith("mq_ingest_queue_depth{")] != []
    assert metric(prom, "mq_ingest_queue_depth") == 0  # read when the run ended
    latency_sum = metric(prom, "mq_ingest_ack_latency_seconds_total")
    assert latency_sum >= metric(prom, "mq_ingest_ack_latency_max_seconds") > 0
    assert sorted(r["event_id"] for r in read_jsonl_dir(tmp_path / "out")) == list(range(60))
