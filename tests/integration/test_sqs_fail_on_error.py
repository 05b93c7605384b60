"""The SQS sink's ``failOnError`` in a job against moto: Flink's ``false`` holds the batch, unset fails."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request

import orjson
import pytest

from sources.fake.store import FakeQueue
from tests.support.jobs import body, job_config, run_main_in_session, start_cli, stop_cli, write_config
from tests.support.polling import wait_for
from tests.support.sqs_server import FaultProxy, drain

pytestmark = [pytest.mark.integration, pytest.mark.spark]

OUTAGE = ["503"] * 1_000_000
"""Every call answered 503 ServiceUnavailable (retryable) until the list is cleared."""


def sqs_sink(url: str, endpoint: str, **over) -> dict:
    """A sink on a standard queue (no deduplication hides a double), fast backoff, no
    GetQueueAttributes (its byte limits given), ``max_retries`` 1: today's default budget
    would give up after one re-send."""
    return {
        "type": "sqs",
        "name": "out",
        "sqsUrl": url,
        "aws.endpoint": endpoint,
        "maxBatchSizeInBytes": "256KiB",
        "maxRecordSizeInBytes": "256KiB",
        "max_retries": 1,
        "backoff.initial_interval": "50ms",
        "backoff.max_interval": "200ms",
    } | over


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:  # not listening yet
        return 0, str(err)


def event_ids(bodies: list[str]) -> list[int]:
    return sorted(orjson.loads(b)["event_id"] for b in bodies)


def test_fail_on_error_false_holds_the_batch_until_sqs_takes_it_and_a_stop_cuts_it_short(
    tmp_path, sqs, make_queue, moto_url, free_port
):
    """Flink's ``failOnError: false``: SQS failing (one call with half its entries refused, then
    503s) neither fails the job nor acks anything; /healthz names the held sink; once SQS is
    back every row arrives exactly once and the source is emptied. Then SQS fails again and a
    SIGTERM ends the endless re-sends promptly: exit 0, that batch unacked, back on its queue."""
    dst = make_queue()
    source = FakeQueue(str(tmp_path / "queues"), "in")
    source.send_batch([{"body": body(i)} for i in range(20)])
    with FaultProxy(moto_url, faults=["fail_entries", *OUTAGE]) as proxy:
        cfg = job_config(
            tmp_path,
            trigger={"mode": "processing_time", "interval": "500ms"},
            sinks=[sqs_sink(dst, proxy.url, failOnError=False)],
            metrics={"port": free_port, "host": "127.0.0.1", "health_max_batch_age": "2s"},
        )
        proc = start_cli(write_config(tmp_path, cfg))
        try:
            calls = lambda: len(proxy.actions("SendMessageBatch"))  # noqa: E731
            wait_for(lambda: calls() > 3, 180, "re-sends beyond max_retries (1)")
            assert proc.poll() is None, "the job goes on"
            stalled = "unhealthy: sink out has not finished writing batch "
            wait_for(lambda: healthz(free_port)[1].startswith(stalled), 60, "/healthz naming the sink")
            assert "re-sending what its target refuses until it takes them" in healthz(free_port)[1]
            assert source.count()["total"] == 20, "nothing acked while the batch is held"
            first = drain(sqs, dst)  # the first call's even entries, taken once
            assert 0 < len(first) < 20
            proxy.faults = []  # SQS is back
            wait_for(lambda: source.count()["total"] == 0, 120, "the source queue emptied")
            wait_for(lambda: healthz(free_port) == (200, "ok\n"), 60, "/healthz ok again")
            delivered = event_ids(first + drain(sqs, dst))

            proxy.faults = list(OUTAGE)
            source.send_batch([{"body": body(i)} for i in range(20, 25)])
            held = calls() + 3
            wait_for(lambda: calls() > held, 120, "the next batch held")
            asked = time.monotonic()
            code, out = stop_cli(proc)
            took = time.monotonic() - asked
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0, out
    assert took < 60, f"the stop took {took:.0f}s"
    assert re.search(r"stopped: batch \d+ cancelled while sink out re-sent what its target refused", out), out
    assert "StackOverflowError" not in out, "Spark's own stop path took the cancelled batch's error"
    warned = [
        line for line in out.splitlines() if "failOnError false: re-sent until the target takes it" in line
    ]
    assert any("ServiceUnavailable" in line for line in warned), out[-3000:]  # where /healthz points
    assert delivered == list(range(20)), "each of the first 20 exactly once"
    assert drain(sqs, dst) == [], "nothing of the held batch reached SQS"
    assert source.count()["total"] == 5, "the held batch unacked, back on its queue"


def test_an_unset_fail_on_error_still_fails_the_job_after_max_retries(spark, tmp_path, make_queue, moto_url):
    """The default stays as it was: ``max_retries`` re-sends, then the batch fails (exit 1,
    one error line naming the call), nothing acked."""
    dst = make_queue()
    source = FakeQueue(str(tmp_path / "queues"), "in")
    source.send_batch([{"body": body(i)} for i in range(5)])
    with FaultProxy(moto_url, faults=OUTAGE[:100]) as proxy:
        cfg = job_config(tmp_path, sinks=[sqs_sink(dst, proxy.url)])
        code, _, err = run_main_in_session(write_config(tmp_path, cfg))
        calls = len(proxy.actions("SendMessageBatch"))
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(errors) == 1, err[-3000:]
    assert "SendMessageBatch" in errors[0] and "ServiceUnavailable" in errors[0], errors[0]
    assert calls == 2, "the first call and max_retries (1) re-send"
    assert source.count()["total"] == 5, "nothing acked"
