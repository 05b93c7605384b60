"""The metrics port's HTTP endpoint: Prometheus text at /metrics, 200/503 with a reason at /healthz."""

from __future__ import annotations

import http.client
import logging
import socket
import struct
import threading
import urllib.error
import urllib.request

import pytest

from ingest.errors import redact
from ingest.metrics import Metrics
from ingest.ops.health import Endpoint
from tests.support.polling import wait_for


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def endpoint():
    state: dict = {"reason": None}
    metrics = Metrics("job")
    metrics.inc("received", 7, source="q")
    ep = Endpoint(metrics.registry, lambda: state["reason"], "127.0.0.1", 0)
    port = ep.start()
    state["endpoint"] = ep
    yield port, state
    ep.stop()


def test_metrics_and_health(endpoint):
    port, state = endpoint
    status, text = get(port, "/metrics")
    assert status == 200 and 'mq_ingest_received_total{job="job",source="q"} 7.0' in text
    assert get(port, "/healthz") == (200, "ok\n")
    state["reason"] = "receiver thread receiver-q-0 is not running"
    assert get(port, "/healthz") == (503, "unhealthy: receiver thread receiver-q-0 is not running\n")
    assert get(port, "/nope")[0] == 404


def test_a_reason_is_one_redacted_line_and_a_failing_check_answers_500(endpoint):
    port, state = endpoint
    redact.add(["hunter2-secret"])
    state["reason"] = "login with hunter2-secret failed\nsecond line"
    assert get(port, "/healthz") == (503, "unhealthy: login with *** failed second line\n")
    state["reason"] = 42  # not a string: the check itself is broken
    assert get(port, "/healthz")[0] == 500


def _serving(ep: Endpoint) -> list[threading.Thread]:
    """The endpoint's threads still handling a connection: ``socketserver`` runs each as its
    server's ``process_request_thread``. Only this server's: a pytest worker holds other servers'
    (moto's, for the keep-alive connections of earlier tests' clients), which never end."""
    server = ep._server
    return [
        t
        for t in threading.enumerate()
        if getattr(getattr(t, "_target", None), "__self__", None) is server and server is not None
    ]


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def endpoint_log(monkeypatch):
    """The endpoint's log records at every level, kept here only: not passed on to the handlers
    earlier tests left on the root logger (one on a closed stream would complain on stderr)."""
    logger = logging.getLogger("ingest.ops.health")
    kept, level = _Kept(), logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.DEBUG)
    monkeypatch.setattr(logger, "propagate", False)
    yield kept.records
    logger.removeHandler(kept)
    logger.setLevel(level)


def test_connections_dropped_mid_request_print_nothing_on_stderr(endpoint, endpoint_log, capfd):
    """A scraper that gives up (a timeout, a restart) resets its connection; before, each one
    printed a trace of ~20 lines on stderr, outside logging and redaction."""
    port, state = endpoint
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers not ended
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
    wait_for(lambda: not _serving(state["endpoint"]), 30, "every dropped connection handled")
    assert get(port, "/healthz") == (200, "ok\n")
    assert capfd.readouterr().err == ""
    assert {r.levelname for r in endpoint_log} <= {"DEBUG"}


def test_an_idle_connection_is_closed_after_the_idle_timeout():
    ep = Endpoint(Metrics("job").registry, lambda: None, "127.0.0.1", 0)
    ep.idle_timeout = 0.5  # a few seconds by default
    port = ep.start()

    def closed(conn: socket.socket) -> bool:
        try:
            return conn.recv(1) == b""
        except TimeoutError:
            return False

    try:
        with socket.create_connection(("127.0.0.1", port)) as conn:  # sends nothing
            conn.settimeout(0.1)
            wait_for(lambda: closed(conn), 30, "the idle connection closed by the endpoint")
        assert get(port, "/healthz") == (200, "ok\n")
    finally:
        ep.stop()


@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_head_answers_as_get_without_the_body(endpoint, path):
    port, _ = endpoint
    status, text = get(port, path)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("HEAD", path)
        head = conn.getresponse()
        assert (head.status, head.read()) == (status, b"")
        assert int(head.headers["Content-Length"]) == len(text.encode())
    finally:
        conn.close()


def test_a_sink_write_longer_than_max_batch_age_is_named():
    """A batch held by a sink that re-sends without end (SQS, failOnError false) shows as that sink."""
    import threading
    import time
    from types import SimpleNamespace

    from ingest.batch.info import SinkWrite
    from ingest.intake.leases import InFlight
    from ingest.ops.job_health import Liveness
    from ingest.supervisor import Supervisor

    stager = SimpleNamespace(failing=False, dir="staging")
    live = Liveness(Supervisor(), stager, InFlight(), 5.0, threading.Event())  # type: ignore[arg-type]
    now = time.monotonic()
    assert live.reason(writing=SinkWrite("out", 3, now - 4, 5.0)) is None
    assert live.reason(writing=SinkWrite("out", 3, now - 9, 5.0)) == (
        "sink out has not finished writing batch 3 in 9s, re-sending what its target refuses "
        "until it takes them (its errors are in the executors' log)"
    )
    assert live.reason(writing=SinkWrite("db", 4, now - 9, None)) == (
        "sink db has not finished writing batch 4 in 9s (its errors are in the executors' log)"
    )
