"""A source's own cap on outstanding messages, and whether a stop makes its in-flight messages visible."""

from __future__ import annotations

import pytest

from ingest.config import parse_config
from ingest.intake.leases import InFlight
from ingest.intake.receiver import Backpressure
from ingest.pipeline import Job
from sources.fake.store import FakeQueue
from tests.support.jobconfig import job_config

CONSOLE = [{"type": "console", "name": "out"}]


def test_a_source_cap_pauses_that_source_only():
    inflight = InFlight()
    pressure = Backpressure(inflight, max_in_flight=1000, max_bytes=10**9, per_source={"a": 5})
    inflight.add("a", [f"h{i}" for i in range(4)], [10] * 4, 30)
    inflight.add("b", [f"g{i}" for i in range(50)], [10] * 50, 30)
    assert not pressure.blocked("a") and not pressure.blocked("b")
    inflight.add("a", ["h4"], [10], 30)
    assert pressure.blocked("a") and not pressure.blocked("b") and inflight.count_of("a") == 5
    inflight.pop("a", ["h0"])
    assert not pressure.blocked("a")


def test_a_source_whose_oldest_message_is_held_too_long_pauses_until_it_is_acked():
    from tests.support.polling import wait_for

    inflight = InFlight()
    pressure = Backpressure(inflight, max_in_flight=1000, max_bytes=10**9, hold={"a": 0.2, "b": 60})
    inflight.add("a", ["old"], [10], 30)
    inflight.add("b", ["g0"], [10], 30)
    assert not pressure.holding("a")
    wait_for(lambda: pressure.holding("a"), timeout=10)
    inflight.add("a", ["new"], [10], 30)  # a receive already under way lands
    assert pressure.holding("a") and not pressure.holding("b")
    assert not pressure.blocked("a")  # pacing, not a cap: no pause event, no backpressurePauses
    inflight.pop("a", ["old"])  # acked: the oldest now is the new one
    assert not pressure.holding("a")


@pytest.mark.parametrize("reset", [True, False])
def test_a_stop_releases_in_flight_messages_unless_reset_visibility_is_off(tmp_path, reset):
    queue = FakeQueue(str(tmp_path / "q"), "in")
    queue.send_batch([{"body": "{}"} for _ in range(3)])
    source = {"type": "fake", "name": "src", "path": str(tmp_path / "q"), "queue": "in"}
    source |= {"visibility_timeout": "1h", "reset_visibility": reset}
    job = Job(parse_config(job_config(source, tmp_path, CONSOLE)), echo=lambda s: None)
    with job.lock:
        got = job.sources["src"].receive(10, 0)  # as a receiver would, then the job stops
        job.inflight.add(
            "src", [m.receipt_handle for m in got], [2] * len(got), 3600, [m.message_id for m in got]
        )
        job._shutdown()
    assert queue.count()["visible"] == (3 if reset else 0)


def test_a_receiver_stops_taking_messages_at_its_source_cap(tmp_path):
    from ingest.intake.receiver import Receiver
    from ingest.intake.staging import Stager
    from ingest.metrics import Metrics
    from sources.fake.config import FakeSourceConfig
    from sources.fake.source import FakeSource
    from tests.support.polling import wait_for

    queue = FakeQueue(str(tmp_path / "q"), "in")
    queue.send_batch([{"body": "{}"} for _ in range(100)])
    cfg = {"type": "fake", "name": "src", "path": str(tmp_path / "q"), "queue": "in", "batch_size": 5}
    source = FakeSource(FakeSourceConfig.model_validate(cfg | {"max_outstanding_messages": 12}))
    inflight, metrics = InFlight(), Metrics("t")
    st = Stager(str(tmp_path / "staging"), roll_messages=1000, roll_bytes=10**9, roll_interval=60)
    pressure = Backpressure(inflight, 10**6, 10**9, st, per_source={"src": 12})
    r = Receiver(source, 0, st, inflight, pressure, metrics, 0.05)
    r.start()
    try:
        wait_for(lambda: metrics.total("backpressurePauses") >= 1, 10, "a pause at the cap")
        assert 12 <= inflight.count_of("src") < 12 + 5  # the cap, and at most one batch over it
        assert queue.count()["visible"] == 100 - inflight.count_of("src")
    finally:
        r.stop()
        r.join(timeout=5)


@pytest.mark.parametrize(("mode", "expected"), [("available_now", 1.0), ("processing_time", 20.0)])
def test_a_drain_caps_each_long_poll_at_drain_wait(tmp_path, mode, expected):
    """A drain ends about two polls after its last message: with the source's own 20 s wait a
    drain on an empty queue idled 20-40 s before it could stop."""
    from tests.support.polling import wait_for

    source = {"type": "fake", "name": "src", "path": str(tmp_path / "q"), "queue": "in", "wait_time": "20s"}
    cfg = job_config(source, tmp_path, CONSOLE, trigger={"mode": mode})
    job = Job(parse_config(cfg), echo=lambda s: None)
    waits: list[float] = []
    job.sources["src"].receive = lambda n, wait: waits.append(wait) or []  # type: ignore[method-assign]
    job.receivers.start()
    try:
        wait_for(lambda: len(waits) >= 2, 10, "two receives")
    finally:
        job.receivers.stop()
    assert set(waits) == {expected}
