"""The fake queue behaves like a queue: visibility, redelivery, FIFO groups, dedup, durability, processes."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import subprocess
import sys
import time

import pytest

from ingest.config.sources import FakeSeed
from sources.fake import seed_demo
from sources.fake_store import FakeQueue
from tests.spark.jobs import ROOT


def test_visibility_and_redelivery(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    mid = q.send("hello", message_attributes={"k": "v"})
    first = q.receive(10, 0, 0.3)
    assert [m.message_id for m in first] == [mid]
    assert first[0].receive_count == 1 and first[0].message_attributes == {"k": "v"}
    assert q.receive(10, 0, 0.3) == []
    assert q.count() == {"visible": 0, "in_flight": 1, "delayed": 0, "total": 1}
    time.sleep(0.4)
    again = q.receive(10, 0, 5)
    assert again[0].message_id == mid and again[0].receive_count == 2
    assert again[0].receipt_handle != first[0].receipt_handle
    assert again[0].first_receive_ts == first[0].first_receive_ts
    stale = q.delete([first[0].receipt_handle])
    assert stale.failed and not stale.deleted
    assert q.delete([again[0].receipt_handle]).deleted == [again[0].receipt_handle]
    assert q.count()["total"] == 0


def test_change_visibility_extends_and_releases(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send_batch([{"body": "a"}, {"body": "b"}])
    a, b = q.receive(2, 0, 0.3)
    assert q.change_visibility([a.receipt_handle], 5) == {a.receipt_handle: a.receipt_handle}
    q.change_visibility([b.receipt_handle], 0)
    assert [m.body for m in q.receive(10, 0, 5)] == ["b"]
    time.sleep(0.4)
    assert q.receive(10, 0, 5) == []  # "a" was extended
    assert q.change_visibility(["nope"], 1) == {}


def test_long_poll_waits_for_a_send(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; time.sleep(0.5); from sources.fake_store import FakeQueue; "
            f"FakeQueue({str(tmp_path)!r}, 'q').send('late')",
        ],
        cwd=ROOT,
    )
    got = q.receive(1, 10, 5)
    proc.wait()
    assert [m.body for m in got] == ["late"]


def test_delay_seconds(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send("later", delay_seconds=0.3)
    assert q.count()["delayed"] == 1 and q.receive(1, 0, 5) == []
    time.sleep(0.35)
    assert [m.body for m in q.receive(1, 0, 5)] == ["later"]


def test_fifo_order_group_lock_and_dedup(tmp_path):
    q = FakeQueue(str(tmp_path), "f", fifo=True)
    with pytest.raises(ValueError, match="group_id is required"):
        q.send("x")
    for i in range(3):
        q.send(f"a{i}", group_id="A")
        q.send(f"b{i}", group_id="B")
    first = q.receive(1, 0, 5)
    assert [m.body for m in first] == ["a0"]
    # Group A is locked while a0 is in flight; B is free.
    assert [m.body for m in q.receive(10, 0, 5)] == ["b0", "b1", "b2"]
    assert q.receive(10, 0, 5) == []
    q.delete([first[0].receipt_handle])
    rest = q.receive(10, 0, 5)
    assert [m.body for m in rest] == ["a1", "a2"]
    assert int(rest[0].sequence_number) < int(rest[1].sequence_number)
    # Dedup window: same dedup id (or same body without one) is accepted but not enqueued twice.
    one = q.send("same", group_id="C", dedup_id="d1")
    assert q.send("other", group_id="C", dedup_id="d1") == one
    q.send("body-dedup", group_id="C")
    q.send("body-dedup", group_id="C")
    assert q.count()["visible"] == 2


def test_durable_across_reopen(tmp_path):
    FakeQueue(str(tmp_path), "q").send_batch([{"body": str(i)} for i in range(10)])
    q2 = FakeQueue(str(tmp_path), "q")
    assert sorted(m.body for m in q2.receive(100, 0, 5)) == sorted(str(i) for i in range(10))


def test_pickles_without_connection(tmp_path):
    q = FakeQueue(str(tmp_path), "q")
    q.send("x")
    q2 = pickle.loads(pickle.dumps(q))
    assert q2.count()["total"] == 1


def _consume(path, out):
    q = FakeQueue(path, "shared")
    got = []
    idle = 0
    while idle < 3:
        msgs = q.receive(20, 0.2, 30)
        if not msgs:
            idle += 1
            continue
        idle = 0
        q.delete([m.receipt_handle for m in msgs])
        got += [m.body for m in msgs]
    out.put(got)


def test_several_processes_each_message_once(tmp_path):
    q = FakeQueue(str(tmp_path), "shared")
    q.send_batch([{"body": str(i)} for i in range(600)])
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_consume, args=(str(tmp_path), out)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    bodies = [b for r in results for b in r]
    assert sorted(bodies, key=int) == [str(i) for i in range(600)]
    assert q.count()["total"] == 0


def test_seed_demo_counts_and_only_if_empty(tmp_path):
    q = FakeQueue(str(tmp_path), "demo")
    counts = seed_demo(q, FakeSeed(messages=30, duplicates=4, malformed=2))
    assert counts == {"messages": 30, "duplicates": 4, "malformed": 2}
    assert q.count()["total"] == 36
    ids = [m.message_id for m in q.peek(100)]
    assert len(set(ids)) == 32  # the duplicates reuse ids
    assert seed_demo(q, FakeSeed(messages=30)) == {"messages": 0, "duplicates": 0, "malformed": 0}


def cli(tmp_path, *args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "ingest.fakeq", "--path", str(tmp_path), "--queue", "c", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_send_peek_count_purge(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert "sent 2" in cli(tmp_path, "send", "--file", str(f)).stdout
    assert "sent 1" in cli(tmp_path, "send", stdin='{"a": 3}\n').stdout
    env = '{"body": "x", "message_attributes": {"k": "v"}}\n'
    assert "sent 1" in cli(tmp_path, "send", "--envelope", stdin=env).stdout
    assert '"total":4' in cli(tmp_path, "count").stdout
    peeked = cli(tmp_path, "peek", "-n", "10").stdout.splitlines()
    assert len(peeked) == 4 and '"body":"{\\"a\\": 1}"' in peeked[0]
    assert "purged 4" in cli(tmp_path, "purge").stdout
    assert '"total":0' in cli(tmp_path, "count").stdout


def test_cli_bad_envelope_line_names_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"body": "ok"}\n{"nobody": 1}\n')
    r = cli(tmp_path, "send", "--envelope", "--file", str(f))
    assert r.returncode == 2
    assert f"{f}:2" in r.stderr
