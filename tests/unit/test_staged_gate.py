"""The staging gate: held files reach Spark's listing when they hold a batch, when the oldest has
waited the interval, and all at once on a flush or a stop; a restart drops them."""

from __future__ import annotations

import os

import orjson

from ingest.staged_files import HELD_DIR, write_whole
from ingest.staged_gate import Gate
from ingest.staging import Stager
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
    """A stager rolling a file every 10 lines and holding them, unless ``over`` says otherwise."""
    settings = {
        "roll_messages": 10,
        "roll_interval": 3600,
        "batch_messages": 10**6,
        "batch_wait": 3600,
    } | over
    return Stager(str(tmp_path), roll_bytes=10**9, **settings)


def add(st: Stager, n: int, start: int = 0) -> None:
    """Hand ``n`` lines to ``st`` ten at a time, as receivers do (each ten roll a file)."""
    for k in range(start, start + n, 10):
        st.add(lines(min(10, start + n - k), start=k))


def hold(gate: Gate, name: str, n: int) -> None:
    write_whole(gate.dir, name, b"{}\n" * n, held=True)
    gate.hold(name, n)


def test_held_files_are_published_together_once_they_hold_batch_messages(tmp_path):
    clock = Clock()
    gate = Gate(tmp_path, batch_messages=100, wait=0.5, clock=clock)
    hold(gate, "a.jsonl", 40)
    hold(gate, "b.jsonl", 40)
    assert not gate.due() and listed(tmp_path) == [] and gate.messages == 80
    hold(gate, "c.jsonl", 40)
    assert gate.due(), "120 held messages reach batch_messages"
    assert gate.publish() == 120
    assert listed(tmp_path) == ["a.jsonl", "b.jsonl", "c.jsonl"] and held(tmp_path) == []
    assert (gate.messages, gate.files, gate.published) == (0, 0, 120)
    assert not gate.due(), "nothing held: nothing due"


def test_held_files_are_published_once_the_oldest_has_waited_the_interval(tmp_path):
    clock = Clock()
    gate = Gate(tmp_path, batch_messages=10_000, wait=0.5, clock=clock)
    hold(gate, "a.jsonl", 3)
    clock.now += 0.3
    hold(gate, "b.jsonl", 3)
    clock.now += 0.19
    assert not gate.due(), "the oldest has waited 0.49 s of 0.5"
    clock.now += 0.01
    assert gate.due(), "the oldest has waited the interval; the newer one goes with it"
    assert gate.publish() == 6 and listed(tmp_path) == ["a.jsonl", "b.jsonl"]
    hold(gate, "c.jsonl", 3)
    assert not gate.due(), "the clock starts again at the next held file"


def test_a_publish_that_fails_leaves_the_rest_held_in_order(tmp_path):
    gate = Gate(tmp_path, batch_messages=1, wait=0.5, clock=Clock())
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        hold(gate, name, 2)
    os.unlink(tmp_path / HELD_DIR / "b.jsonl")
    try:
        gate.publish()
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("a rename that fails raises")
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


def test_the_stager_publishes_a_lone_file_within_the_interval(tmp_path):
    st = stager(tmp_path, roll_messages=10**6, roll_interval=0.05, batch_wait=0.2)
    st.start()
    try:
        st.add(lines(3))
        wait_for(lambda: len(listed(tmp_path)) == 1, what="the timer rolls and then publishes the file")
        assert held(tmp_path) == [] and st.gate.messages == 0 and ids(tmp_path) == ["m0", "m1", "m2"]
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


def test_nothing_is_published_while_the_stager_is_held(tmp_path):
    st = stager(tmp_path, batch_messages=10, batch_wait=0)
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
