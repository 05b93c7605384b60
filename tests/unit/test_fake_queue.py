"""The fake queue behaves like a queue: visibility, handles, FIFO, dedup, durability, processes, CLI."""

from __future__ import annotations

import hashlib
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import orjson
import pytest

import sources.fake.store
from sources.fake.store import STALE_HANDLE, FakeQueue

ROOT = Path(__file__).resolve().parents[2]
VIS = 1.0  # visibility timeout of the tests that wait for one to run out


def test_received_message_is_hidden_then_back_with_new_handle(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    mid = q.send("héllo ✓", message_attributes={"k": "v"})
    [first] = q.receive(10, 0, VIS)
    assert (first.message_id, first.body, first.receive_count) == (mid, "héllo ✓", 1)
    assert first.md5 == hashlib.md5("héllo ✓".encode()).hexdigest()
    assert first.message_attributes == {"k": "v"} and first.enqueue_ts == first.sent_ts
    assert first.attributes["ApproximateReceiveCount"] == "1"
    assert first.attributes["SentTimestamp"] == str(first.sent_ts)
    assert first.attributes["ApproximateFirstReceiveTimestamp"] == str(first.first_receive_ts)
    assert q.receive(10, 0, VIS) == []
    assert q.count() == {"visible": 0, "in_flight": 1, "delayed": 0, "total": 1}
    time.sleep(VIS + 0.1)
    [again] = q.receive(10, 0, 30)
    assert (again.message_id, again.receive_count) == (mid, 2)
    assert again.receipt_handle != first.receipt_handle
    assert again.first_receive_ts == first.first_receive_ts
    stale = q.delete([first.receipt_handle])
    assert stale.deleted == [] and stale.failed == {first.receipt_handle: STALE_HANDLE}
    assert q.count()["in_flight"] == 1
    assert q.delete([again.receipt_handle]).deleted == [again.receipt_handle]
    assert q.count()["total"] == 0


def test_delete_reports_bad_handles_and_tolerates_repeats(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": "a"}, {"body": "b"}])
    a, b = q.receive(2, 0, 30)
    bogus = ["nope", "", "999-abc", a.receipt_handle + "0"]
    res = q.delete([a.receipt_handle, a.receipt_handle, *bogus])
    assert res.deleted == [a.receipt_handle]
    assert res.failed == dict.fromkeys(bogus, STALE_HANDLE)
    assert [m.body for m in q.peek(10)] == [] and q.count()["in_flight"] == 1
    assert q.delete([a.receipt_handle]).failed == {a.receipt_handle: STALE_HANDLE}
    assert q.delete([b.receipt_handle]).deleted == [b.receipt_handle]


def test_change_visibility_extends_and_releases(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": "a"}, {"body": "b"}])
    a, b = q.receive(2, 0, VIS)
    assert q.change_visibility([a.receipt_handle], 3 * VIS) == {a.receipt_handle: a.receipt_handle}
    assert q.change_visibility([b.receipt_handle], 0) == {b.receipt_handle: b.receipt_handle}
    [b2] = q.receive(10, 0, 30)
    assert (b2.body, b2.receive_count) == ("b", 2)
    assert q.change_visibility([b.receipt_handle, "nope"], 5) == {}  # stale and unknown left out
    time.sleep(VIS + 0.2)
    assert q.receive(10, 0, 30) == []  # "a" outlived its first timeout
    assert q.count() == {"visible": 0, "in_flight": 2, "delayed": 0, "total": 2}


def test_long_poll_returns_a_message_sent_while_waiting(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    sender = threading.Timer(0.3, lambda: FakeQueue(str(tmp_path), "q").send("late"))
    sender.start()
    try:
        got = q.receive(5, 10, 30)
    finally:
        sender.join()
    assert [m.body for m in got] == ["late"]
    assert q.receive(5, 0.05, 30) == []


def test_delayed_message_appears_after_its_delay(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send("later", delay_seconds=VIS)
    q.send("now")
    assert q.count() == {"visible": 1, "in_flight": 0, "delayed": 1, "total": 2}
    assert [m.body for m in q.receive(10, 0, 30)] == ["now"]
    time.sleep(VIS + 0.1)
    [later] = q.receive(10, 0, 30)
    assert later.body == "later" and later.enqueue_ts == later.sent_ts + int(VIS * 1000)


def test_peek_changes_nothing_and_purge_empties(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": f"m{i}"} for i in range(5)])
    peeked = q.peek(3)
    assert [m.body for m in peeked] == ["m0", "m1", "m2"]
    assert all(m.receive_count == 0 and m.receipt_handle == "" for m in peeked)
    assert q.count()["visible"] == 5
    assert q.purge() == 5 and q.count()["total"] == 0


def test_send_refuses_bad_entries_and_sends_none_of_the_batch(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    bad = [
        ({"body": 1}, "body must be a string"),
        ({"body": "x", "message_attributes": {"k": 1}}, "message_attributes"),
        ({"body": "x", "delay_seconds": -1}, "delay_seconds"),
        ({"body": "x", "colour": "red"}, "unknown message key"),
    ]
    for entry, needle in bad:
        with pytest.raises(ValueError, match=needle):
            q.send_batch([{"body": "fine"}, entry])
    assert q.count()["total"] == 0
    with pytest.raises(ValueError, match="group_id"):
        FakeQueue(str(tmp_path), "f", fifo=True).send("x")


def test_fifo_groups_in_order_and_locked_while_in_flight(tmp_path):
    q = FakeQueue(str(tmp_path), "f", fifo=True)
    for i in range(3):
        q.send(f"a{i}", group_id="A")
        q.send(f"b{i}", group_id="B")
    [a0] = q.receive(1, 0, 30)
    assert (a0.body, a0.group_id, a0.attributes["MessageGroupId"]) == ("a0", "A", "A")
    assert a0.attributes["SequenceNumber"] == a0.sequence_number
    bs = q.receive(10, 0, 30)  # A is locked while a0 is in flight; B's messages come in order
    assert [m.body for m in bs] == ["b0", "b1", "b2"]
    assert q.receive(10, 0, 30) == []
    q.delete([a0.receipt_handle])
    rest = q.receive(10, 0, 30)
    assert [m.body for m in rest] == ["a1", "a2"]
    seqs = [int(m.sequence_number) for m in [a0, *rest]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    q.change_visibility([m.receipt_handle for m in reversed(bs)], 0)  # B comes back, still in order
    assert [(m.body, m.receive_count) for m in q.receive(10, 0, 30)] == [("b0", 2), ("b1", 2), ("b2", 2)]


def test_fifo_delayed_message_holds_back_the_rest_of_its_group(tmp_path):
    q = FakeQueue(str(tmp_path), "f", fifo=True)
    q.send("a0", group_id="A", delay_seconds=VIS)
    q.send("a1", group_id="A")
    q.send("b0", group_id="B")
    assert [m.body for m in q.receive(10, 0, 30)] == ["b0"]
    time.sleep(VIS + 0.1)
    assert [m.body for m in q.receive(10, 0, 30)] == ["a0", "a1"]


def test_fifo_dedup_window(tmp_path, monkeypatch):
    q = FakeQueue(str(tmp_path), "f", fifo=True)
    first = q.send("one", group_id="G", dedup_id="d1")
    assert q.send("other body", group_id="G", dedup_id="d1") == first
    by_body = q.send("same body", group_id="G")
    ids = q.send_batch([{"body": "same body", "group_id": "H"}, {"body": "new", "group_id": "G"}] * 2)
    assert ids[0] == ids[2] == by_body and ids[1] == ids[3] != by_body
    assert sorted(m.body for m in q.peek(10)) == ["new", "one", "same body"]
    monkeypatch.setattr(sources.fake.store, "DEDUP_WINDOW_MS", 0)
    time.sleep(0.01)
    assert q.send("one again", group_id="G", dedup_id="d1") != first
    assert q.count()["total"] == 4
    std = FakeQueue(str(tmp_path), "std")  # standard queues keep the id but do not deduplicate
    std.send("x", dedup_id="d")
    std.send("x", dedup_id="d")
    assert std.count()["total"] == 2


def test_durable_across_reopen_with_handles(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": str(i)} for i in range(10)])
    [m] = q.receive(1, 0, 30)
    q.close()
    q2 = FakeQueue(str(tmp_path), "q")
    assert q2.count() == {"visible": 9, "in_flight": 1, "delayed": 0, "total": 10}
    assert q2.delete([m.receipt_handle]).deleted == [m.receipt_handle]
    assert sorted(int(x.body) for x in q2.receive(100, 0, 30)) == [i for i in range(10) if str(i) != m.body]


def test_schema_version_1_file_is_upgraded(tmp_path):
    db = sqlite3.connect(tmp_path / "old.db")
    db.executescript(
        "CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL,"
        " body TEXT NOT NULL, attrs TEXT NOT NULL DEFAULT '{}', group_id TEXT, dedup_id TEXT,"
        " sent_ts INTEGER NOT NULL, visible_at INTEGER NOT NULL, handle TEXT,"
        " receive_count INTEGER NOT NULL DEFAULT 0, first_receive_ts INTEGER);"
        "CREATE UNIQUE INDEX messages_handle ON messages (handle);"
        "INSERT INTO messages (message_id, body, sent_ts, visible_at) VALUES ('m1', 'kept', 5, 5);"
    )
    db.close()
    q = FakeQueue(str(tmp_path), "old")
    q.send("new")
    got = q.receive(10, 0, 30)
    assert [m.body for m in got] == ["kept", "new"]
    assert (got[0].message_id, got[0].enqueue_ts) == ("m1", 5)
    assert q.delete([m.receipt_handle for m in got]).failed == {}


def test_pickles_without_connections_and_works_in_threads(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": str(i)} for i in range(400)])
    q2 = pickle.loads(pickle.dumps(q))  # q has an open connection by now
    seen: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        while msgs := q2.receive(7, 0.1, 30):
            assert q2.delete([m.receipt_handle for m in msgs]).failed == {}
            with lock:
                seen.extend(m.body for m in msgs)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(seen, key=int) == [str(i) for i in range(400)]
    assert q.count()["total"] == 0


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )


def test_several_processes_share_a_queue_each_message_once(tmp_path):
    q = FakeQueue(str(tmp_path), "shared")
    q.send_batch([{"body": str(i)} for i in range(600)])
    consumer = f"""
        import orjson
        from sources.fake.store import FakeQueue
        q, got, failed = FakeQueue({str(tmp_path)!r}, "shared"), [], 0
        while msgs := q.receive(20, 0.3, 60):
            failed += len(q.delete([m.receipt_handle for m in msgs]).failed)
            got += [m.body for m in msgs]
        print(orjson.dumps({{"got": got, "failed": failed}}).decode())
    """
    procs = [_python(consumer) for _ in range(3)]
    try:
        results = [orjson.loads(p.communicate(timeout=60)[0]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [r["failed"] for r in results] == [0, 0, 0]
    bodies = [b for r in results for b in r["got"]]
    assert sorted(bodies, key=int) == [str(i) for i in range(600)]  # each exactly once
    assert q.count()["total"] == 0


def test_forked_child_reopens_its_own_connection(tmp_path):
    script = f"""
        import os
        from sources.fake.store import FakeQueue
        q = FakeQueue({str(tmp_path)!r}, "fork")
        q.send("from parent")
        pid = os.fork()
        if pid == 0:
            q.send_batch([{{"body": f"child {{i}}"}} for i in range(50)])
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        print(sorted(m.body for m in q.receive(100, 0, 30))[-1], q.count()["in_flight"])
    """
    proc = _python(script)
    try:
        out = proc.communicate(timeout=60)[0]
    finally:
        proc.kill()
    assert out.split() == ["from", "parent", "51"]


def test_processes_opening_a_new_queue_file_at_once_all_get_in(tmp_path):
    """SQLite answers "database is locked" at once (no busy wait) to a connection setting WAL while
    another creates the file; a receiver starting as a producer creates the queue must not die.

    The processes are forked from a fork server, not from this pytest worker: a fork of a worker
    whose other threads hold a lock (a Spark session's, gRPC's) can hang its child, and the pool
    with it (600 s, once in a full run)."""
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    with ctx.Pool(8) as pool:
        counts = pool.starmap(_open_and_send, [(str(tmp_path), i) for i in range(8)])
    assert counts == [1] * 8
    assert FakeQueue(str(tmp_path), "race").count()["total"] == 8


def _open_and_send(path: str, i: int) -> int:
    q = FakeQueue(path, "race")
    return len(q.send_batch([{"body": f"m{i}"}]))
