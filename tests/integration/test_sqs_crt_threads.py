"""awscrt's event-loop threads (``sources.sqs.crt_threads``), against moto's server on 127.0.0.1:
each keeps its Python thread state between requests, and a process still exits cleanly."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_awscrt_event_loop_threads_keep_their_python_thread_state_between_requests(
    sqs, make_queue, moto_url, monkeypatch
):
    """Each awscrt callback runs on an event-loop thread Python did not start; without
    ``keep_thread_state`` every callback had a new thread state (mapped and unmapped each time).
    A thread-local set in one request's callback is seen by the next request's on the same thread
    only if the thread state survived between them."""
    import threading

    import boto3

    import sources.sqs.crt as crt

    marker = threading.local()
    seen: list[tuple[int, bool]] = []
    keep = crt.keep_thread_state

    def observed() -> None:
        keep()
        seen.append((threading.get_ident(), getattr(marker, "set", False)))
        marker.set = True

    monkeypatch.setattr(crt, "keep_thread_state", observed)
    url = make_queue()
    client = crt.CrtSqs(moto_url, "us-east-1", boto3.session.Session("k", "s").get_credentials())
    try:
        for _ in range(8):
            client.call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": ["All"]})
    finally:
        client.close()
    threads = {ident for ident, _ in seen}
    assert len(seen) == 8 and threading.get_ident() not in threads
    # The first request on each event-loop thread finds no marker; every later one finds it.
    assert sum(not kept for _, kept in seen) <= len(threads) < 8


EXIT_MID_REQUEST = """
import sys, threading, time
import boto3
from sources.sqs.crt import CrtSqs

client = CrtSqs(sys.argv[1], "us-east-1", boto3.session.Session("k", "s").get_credentials())
ask = {"QueueUrl": sys.argv[2], "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}
replies = []

def poll():
    while True:
        replies.append(client.call("ReceiveMessage", ask))

for _ in range(4):
    threading.Thread(target=poll, daemon=True).start()
while len(replies) < 4 + int(sys.argv[3]):  # each event-loop thread has kept its thread state
    time.sleep(0.01)
sys.exit(0)  # long polls in flight while the interpreter finalizes
"""


def test_a_process_exits_cleanly_with_awscrt_requests_in_flight(make_queue, moto_url):
    """The kept thread states (``sources.sqs.crt_threads``) must not crash the interpreter's exit
    while awscrt's event loop still has replies to call back with: each run exits 0, quietly."""
    import subprocess
    import sys

    url = make_queue()
    for extra in (0, 3):
        done = subprocess.run(
            [sys.executable, "-c", EXIT_MID_REQUEST, moto_url, url, str(extra)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
