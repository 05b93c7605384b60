"""When a job ends: the drain rule (``available_now``) apart from the threads, and bounded sources."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

from ingest import drain
from ingest.drain import DrainRule, finished
from sources.datagen.config import DatagenSourceConfig
from sources.datagen.source import DatagenSource
from sources.fake.config import FakeSourceConfig
from sources.fake.source import FakeSource


@dataclass
class Receiver:
    empty_streak: int = 0
    last_empty_asked: float = 0.0


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

    import ingest.drain

    assert doctest.testmod(ingest.drain).failed == 0


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
