"""The metrics port's HTTP endpoint: Prometheus text at /metrics, 200/503 with a reason at /healthz."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from ingest.errors import redact
from ingest.metrics import Metrics
from ingest.ops.health import Endpoint


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def endpoint():
    state = {"reason": None}
    metrics = Metrics("job")
    metrics.inc("received", 7, source="q")
    ep = Endpoint(metrics.registry, lambda: state["reason"], "127.0.0.1", 0)
    port = ep.start()
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
