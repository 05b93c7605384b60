"""The staging gate: held files reach Spark's listing when they hold a batch, when the oldest has
waited the interval, and all at once on a flush or a stop; a restart drops them."""

from __future__ import annotations

import os
import time

import orjson
import pytest

from ingest.intake.staged_files import HELD_DIR, write_whole
from ingest.intake.staged_gate import Gate
from ingest.intake.staging import Stager
from tests.support.envelopes import lines
from tests.support.polling import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def listed(directory) -> list[str]:
    """What Spark's file source lists: ``*.jsonl`` at the staging dir's top, oldest name first."""
    return sorted(p.name for p in directory.glob("*.jsonl"))


def held(directory) -> list[str]:
    return sorted(p.name for p in (directory / HELD_DIR).glob("*.jsonl"))


def ids(directory) -> list[str]:
    return [
        orjson.loads(x)["message_id"]
        for name in listed(directory)
        for x in (directory / name).read_bytes().splitlines()
    ]


def stager(tmp_path, **over) -> Stager:
    """A stager rolling a file every 10 lines and holding them, unless ``over`` says otherwise: a
    batch of 1000 in an hour is on course while fewer than 10 lines came in 36 s, however slow
    the machine."""
    settings = {"roll_messages": 10, "roll_interval": 3600, "batch_messages": 1000, "batch_wait": 3600} | over
    return Stager(str(tmp_path), roll_bytes=10**9, **settings)


def add(st: Stager, n: int, start: int = 0) -> None:
    """Hand ``n`` lines to ``st`` ten at a time, as receivers do (each ten roll a file)."""
    for k in range(start, start + n, 10):
        st.add(lines(min(10, start + n - k), start=k))


def hold(gate: Gate, name: str, n: int, age: float = 0.0) -> None:
    """Write ``n`` lines as the held file ``name``, its oldest line ``age`` seconds old."""
    write_whole(gate.dir, name, b"{}\n" * n, held=True)
    gate.hold(name, n, gate._clock() - age)


def test_held_files_are_published_together_once_they_hold_batch_messages(tmp_path):
    clock = Clock()
    gate = Gate(tmp_path, batch_messages=100, wait=1.0, clock=clock)
    hold(gate, "a.jsonl", 40)
    clock.now += 0.1
    hold(gate, "b.jsonl", 40)
    assert not gate.due() and listed(tmp_path) == [] and gate.messages == 80, "800 msgs/s: a batch fills"
    hold(gate, "c.jsonl", 40)
    assert gate.due(), "120 held messages reach batch_messages"
    assert gate.publish() == 120
    assert listed(tmp_path) == ["a.jsonl", "b.jsonl", "c.jsonl"] and held(tmp_path) == []
    assert (gate.messages, gate.files, gate.published) == (0, 0, 120)
    assert not gate.due(), "nothing held: nothing due"


def test_at_low_rates_a_file_is_published_at_once(tmp_path):
    gate = Gate(tmp_path, batch_messages=10_000, wait=2.0, clock=Clock())
    hold(gate, "a.jsonl", 5, age=0.5)  # rolled by roll_interval: 10 msgs/s
    assert gate.due(), "no batch of 10,000 fills within 2 s at 10 msgs/s: Spark gets it now"
    assert gate.publish() == 5 and listed(tmp_path) == ["a.jsonl"]


def test_under_load_the_oldest_message_waits_at_most_batch_wait(tmp_path):
    clock = Clock()
    gate = Gate(tmp_path, batch_messages=100, wait=1.0, clock=clock)
    hold(gate, "a.jsonl", 99)  # 99 at once: a batch would fill
    clock.now += 0.99
    assert not gate.due(), "the oldest has waited 0.99 s of 1"
    clock.now += 0.01
    assert gate.due(), "the oldest has waited batch_wait"
    assert gate.publish() == 99 and listed(tmp_path) == ["a.jsonl"]


def test_a_burst_that_stops_is_published_once_its_rate_falls_short(tmp_path):
    clock = Clock()
    gate = Gate(tmp_path, batch_messages=100, wait=1.0, clock=clock)
    hold(gate, "a.jsonl", 60)
    clock.now += 0.3
    hold(gate, "b.jsonl", 30, age=0.1)
    clock.now += 0.59
    assert not gate.due(), "90 in 0.89 s: still on course for 100 within 1 s"
    clock.now += 0.02
    assert gate.due(), "90 in 0.91 s: no batch fills in time; the newer file goes with the older"
    assert gate.publish() == 90 and listed(tmp_path) == ["a.jsonl", "b.jsonl"]
    hold(gate, "c.jsonl", 60)
    assert not gate.due(), "the next held file starts afresh"


def test_a_publish_that_fails_leaves_the_rest_held_in_order(tmp_path):
    gate = Gate(tmp_path, batch_messages=1, wait=0.5, clock=Clock())
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        hold(gate, name, 2)
    os.unlink(tmp_path / HELD_DIR / "b.jsonl")
    with pytest.raises(FileNotFoundError):
        gate.publish()
    assert listed(tmp_path) == ["a.jsonl"] and held(tmp_path) == ["c.jsonl"]
    assert (gate.files, gate.messages, gate.published) == (2, 4, 2), "b and c still held, in order"


def test_the_stager_holds_rolled_files_until_a_batch_is_staged(tmp_path):
    st = stager(tmp_path, batch_messages=30)
    add(st, 25)
    assert listed(tmp_path) == [] and len(held(tmp_path)) == 2 and st.gate.messages == 20
    assert st.buffered == 5
    add(st, 5, start=25)  # rolls the third file: 30 held, all published
    assert len(listed(tmp_path)) == 3 and held(tmp_path) == []
    assert ids(tmp_path) == [f"m{i}" for i in range(30)], "every line once, in order"


def test_at_low_rates_the_stager_lists_a_file_as_soon_as_it_rolls(tmp_path):
    st = stager(tmp_path, roll_messages=10**6, roll_interval=0.05, batch_messages=10**6, batch_wait=60)
    st.start()
    try:
        st.add(lines(3))
        # The gate counts a publish out once it has ended (after the rename and the staging dir's
        # fsync), a moment after Spark can list the file: both are waited for.
        wait_for(
            lambda: len(listed(tmp_path)) == 1 and st.gate.messages == 0,
            what="the timer rolls the file and publishes it",
        )
        assert held(tmp_path) == [] and ids(tmp_path) == ["m0", "m1", "m2"]
    finally:
        st.stop()


def test_the_stager_timer_publishes_held_files_once_the_oldest_has_waited_batch_wait(tmp_path):
    st = stager(tmp_path, batch_messages=100, batch_wait=1.0)
    clock = Clock()
    clock.now = time.monotonic()
    st.gate._clock = clock  # the gate's time stands still until the test moves it
    st.start()
    try:
        add(st, 50)  # 50 at once: on course for a batch of 100 within 1 s
        assert listed(tmp_path) == [] and len(held(tmp_path)) == 5
        clock.now += 1.0
        wait_for(lambda: len(listed(tmp_path)) == 5, what="the timer publishes the held files")
        assert held(tmp_path) == [] and ids(tmp_path) == [f"m{i}" for i in range(50)]
    finally:
        st.stop()


def test_a_flush_publishes_everything_so_a_drain_ends_with_nothing_held(tmp_path):
    st = stager(tmp_path)
    add(st, 25)
    assert len(held(tmp_path)) == 2
    paths = st.flush()
    assert [os.path.basename(p) for p in paths] == listed(tmp_path)[2:], "the buffered lines' file"
    assert held(tmp_path) == [] and st.gate.messages == 0 and st.buffered == 0
    assert ids(tmp_path) == [f"m{i}" for i in range(25)]


def test_a_stop_publishes_everything_held(tmp_path):
    st = stager(tmp_path)
    st.start()
    add(st, 25)
    assert len(held(tmp_path)) == 2
    st.stop()
    assert held(tmp_path) == [] and st.gate.messages == 0
    assert ids(tmp_path) == [f"m{i}" for i in range(25)]


def test_an_empty_receive_publishes_what_is_held(tmp_path):
    st = stager(tmp_path)
    add(st, 20)
    with st.held():
        st.idle()
        assert listed(tmp_path) == [], "not during a query renewal"
    st.idle()
    assert len(listed(tmp_path)) == 2 and held(tmp_path) == [] and st.gate.messages == 0


def test_an_empty_receive_while_other_receivers_staged_lines_publishes_nothing(tmp_path):
    """With several receivers one can lose every race for the messages and come back empty while
    the load goes on: that is no pause, and publishing then cut a micro-batch short (a clean CI
    run's batch of 400 under ``batch_messages: 1000``)."""
    st = stager(tmp_path)
    asked = time.monotonic()  # receiver A's long poll starts
    add(st, 20)  # receiver B stages two files meanwhile: held, the gate waits for more
    st.idle(asked)  # A's poll comes back empty
    assert listed(tmp_path) == [] and len(held(tmp_path)) == 2
    st.idle(time.monotonic())  # a poll asked after the last lines came comes back empty: a pause
    assert len(listed(tmp_path)) == 2 and held(tmp_path) == []


def test_nothing_is_published_while_the_stager_is_held(tmp_path):
    st = stager(tmp_path, batch_messages=10)
    st.add(lines(10))
    assert len(listed(tmp_path)) == 1
    with st.held():  # a query renewal: lines stay buffered, held files stay held
        st.add(lines(10, start=10))
        st._publish(everything=False)
        assert len(listed(tmp_path)) == 1 and st.buffered == 10
    st.add(lines(1, start=20))
    assert len(listed(tmp_path)) == 2 and held(tmp_path) == []


def test_a_restart_removes_held_files_whose_messages_are_still_on_the_queue(tmp_path):
    st = stager(tmp_path)
    add(st, 20)
    st.flush()
    planned = listed(tmp_path)
    add(st, 20, start=20)  # two files held when the job dies
    assert len(held(tmp_path)) == 2
    restarted = stager(tmp_path)
    assert restarted.discard_except({str(tmp_path / name) for name in planned}) == 2
    assert held(tmp_path) == [] and listed(tmp_path) == planned, "only the planned batch is replayed"
