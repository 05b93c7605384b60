"""When a job ends: the drain rule (``available_now``) apart from the threads, and bounded sources."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

from ingest.ops import drain
from ingest.ops.drain import DrainRule, finished
from sources.datagen.config import DatagenSourceConfig
from sources.datagen.source import DatagenSource
from sources.fake.config import FakeSourceConfig
from sources.fake.source import FakeSource


@dataclass
class Receiver:
    empty_streak: int = 0
    last_empty_asked: float = 0.0
    unsure_until: float = 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_docstring_example_runs():
    assert doctest.testmod(drain).failed == 0


def test_not_drained_while_anything_is_in_flight():
    clock = Clock()
    rule = DrainRule(idle_rounds=2, clock=clock)
    idle = [Receiver(empty_streak=5, last_empty_asked=1.0)]
    clock.now = 2.0
    assert not rule.drained(busy=True, receivers=idle)


def test_empty_receives_asked_before_the_last_message_left_flight_prove_nothing():
    # FIFO: a group's unacked messages hide the rest of the group, so its receives look empty.
    clock = Clock()
    rule = DrainRule(idle_rounds=1, clock=clock)
    r = Receiver(empty_streak=3, last_empty_asked=4.0)
    clock.now = 5.0
    assert not rule.drained(busy=True, receivers=[r])  # in flight at t=5
    assert not rule.drained(busy=False, receivers=[r]), "its empty receive was asked at t=4"
    r.last_empty_asked = 5.5
    assert rule.drained(busy=False, receivers=[r])


def test_every_receiver_needs_its_idle_rounds():
    rule = DrainRule(idle_rounds=2, clock=Clock())
    done, short = Receiver(2, 1.0), Receiver(1, 1.0)
    assert not rule.drained(busy=False, receivers=[done, short])
    short.empty_streak = 2
    assert rule.drained(busy=False, receivers=[done, short])


def test_max_batches_ends_the_drain_even_with_messages_in_flight():
    rule = DrainRule(idle_rounds=1, max_batches=3, clock=Clock())
    assert not rule.drained(busy=True, receivers=[Receiver()], batches=2)
    assert rule.drained(busy=True, receivers=[Receiver()], batches=3)


def test_the_module_examples_run():
    import doctest

    import ingest.ops.drain

    assert doctest.testmod(ingest.ops.drain).failed == 0


def test_a_receive_that_raced_the_last_deletes_proves_nothing():
    """Seen on moto with short polls: the last look saw the batch in flight at t=5, the acker's
    deletes returned at t=5.04, and a receive asked at t=5.02 found the FIFO groups still locked.
    Counting it ended the drain with 20 of 30 messages on the queue."""
    clock = Clock()
    rule = DrainRule(idle_rounds=1, clock=clock)
    r = Receiver(empty_streak=1, last_empty_asked=0.0)
    clock.now = 5.0
    assert not rule.drained(busy=True, receivers=[r])
    r.last_empty_asked = 5.02
    clock.now = 5.05
    assert not rule.drained(busy=False, receivers=[r]), "asked before the flight was seen to end"
    r.last_empty_asked = 5.1
    clock.now = 5.2
    assert rule.drained(busy=False, receivers=[r])


def test_after_a_failed_receive_empty_receives_prove_nothing_until_its_messages_come_back():
    """moto answers 500 to a receive that raced another after it had hidden messages: they are
    invisible to every receiver for the visibility timeout, and empty receives then do not mean
    the queue is drained (one drain ended so with a message hidden, unwritten)."""
    clock = Clock()
    rule = DrainRule(idle_rounds=1, clock=clock)
    failed = Receiver(empty_streak=0, last_empty_asked=1.0, unsure_until=4.0)  # failed at t=1, visibility 3 s
    other = Receiver(empty_streak=1, last_empty_asked=2.0)
    clock.now = 2.5
    assert not rule.drained(busy=False, receivers=[failed, other])
    failed.empty_streak, failed.last_empty_asked = 1, 3.0
    other.last_empty_asked = 3.5
    clock.now = 3.9
    assert not rule.drained(busy=False, receivers=[failed, other]), "asked while its messages were hidden"
    failed.last_empty_asked, other.last_empty_asked = 4.1, 4.2
    clock.now = 4.5
    assert rule.drained(busy=False, receivers=[failed, other])


def datagen(name: str, **options) -> DatagenSource:
    cfg = {"type": "datagen", "name": name, "schema": "id BIGINT", "rows-per-second": 1_000_000}
    return DatagenSource(DatagenSourceConfig.model_validate(cfg | options))


def test_a_job_finishes_only_when_every_source_is_bounded_and_exhausted(tmp_path):
    gen, gen2 = datagen("gen", **{"number-of-rows": 2}), datagen("gen2", **{"number-of-rows": 1})
    queue = FakeSource(FakeSourceConfig.model_validate({"type": "fake", "name": "q", "path": str(tmp_path)}))
    assert not queue.bounded and not queue.exhausted(), "a queue is unbounded by default"
    gen.ack([m.receipt_handle for m in gen.receive(10, 0)])
    assert gen.exhausted() and not finished([gen, gen2]), "gen2 has a row to give"
    gen2.ack([m.receipt_handle for m in gen2.receive(10, 0)])
    assert finished([gen, gen2])
    assert not finished([gen, gen2, queue]), "a bounded and an unbounded source: the job runs on"
    assert not finished([gen, datagen("endless")])
    assert not finished([])


def _late_receiver(tmp_path, keep: bool):
    """A receiver whose receive is in flight when it is stopped: the fake queue's receive, run only
    once the stop was asked (the interleaving a drain's end can meet, forced here)."""
    from ingest.intake.leases import InFlight
    from ingest.intake.receiver import Backpressure, ReceiverPool
    from ingest.intake.staging import Stager
    from ingest.metrics import Metrics
    from sources.fake.store import FakeQueue
    from tests.support.polling import wait_for

    queue = FakeQueue(str(tmp_path / "q"), "in")
    queue.send_batch([{"body": "{}"} for _ in range(3)])

    class Late(FakeSource):
        def receive(self, max_messages, wait_seconds):
            wait_for(lambda: pool.threads and pool.threads[0].stopping.is_set(), 10, "the stop")
            return super().receive(max_messages, 0)

    cfg = {
        "type": "fake",
        "name": "src",
        "path": str(tmp_path / "q"),
        "queue": "in",
        "visibility_timeout": "1h",
    }
    source = Late(FakeSourceConfig.model_validate(cfg))
    inflight = InFlight()
    st = Stager(str(tmp_path / "staging"), roll_messages=1000, roll_bytes=10**9, roll_interval=60)
    job = type("Cfg", (), {})()
    job.sources = [type("S", (), {"name": "src", "receivers": 1, "poll_wait": 1.0})()]
    job.trigger = type("T", (), {"mode": "available_now", "drain_wait": 1.0})()
    pool = ReceiverPool(
        job,
        {"src": source},
        st,
        inflight,
        Backpressure(inflight, 10**6, 10**9),
        Metrics("t"),
        lambda n, t: None,
    )
    pool.start()
    assert pool.stop(timeout=20, keep=keep)
    return queue, inflight, st


def test_a_receive_in_flight_when_a_drain_ends_stages_what_it_got(tmp_path):
    """The drain rule read a receiver's empty streak while its next receive was on the wire: what
    that receive returns is staged for the drain's last batch, not handed back unwritten."""
    queue, inflight, st = _late_receiver(tmp_path, keep=True)
    assert st.buffered == 3 and inflight.count == 3
    assert queue.count()["in_flight"] == 3


def test_a_receive_in_flight_when_a_job_is_stopped_gives_its_messages_back(tmp_path):
    queue, inflight, st = _late_receiver(tmp_path, keep=False)
    assert st.buffered == 0 and inflight.count == 0
    assert queue.count()["visible"] == 3
