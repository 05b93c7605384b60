"""Leases and acks on the real fake queue: extension keeps messages hidden, acks use the newest handle."""

from __future__ import annotations

import time

from checkpoints.journal import AckJournal
from ingest.config import parse_config
from ingest.connector import AckResult
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight, LeaseKeeper
from ingest.metrics import Metrics
from sources.fake.source import FakeSource
from tests.support.polling import wait_for


def make_source(tmp_path, visibility=1.0):
    cfg = parse_config(
        {
            "name": "j",
            "sources": [
                {
                    "type": "fake",
                    "name": "src",
                    "path": str(tmp_path / "q"),
                    "queue": "in",
                    "visibility_timeout": visibility,
                    "format": "raw",
                }
            ],
            "sinks": [{"type": "console", "name": "c"}],
            "checkpoint": str(tmp_path / "ck"),
            "state": {"path": str(tmp_path / "st")},
            "staging": {"dir": str(tmp_path / "sg")},
        }
    )
    return FakeSource(cfg.sources[0])


def receive_all(source, n, wait=3.0):
    got, deadline = [], time.monotonic() + wait
    while len(got) < n and time.monotonic() < deadline:
        got += source.receive(source.max_batch, 0.1)
    return got


def test_lease_keeper_keeps_messages_hidden_past_the_timeout(tmp_path):
    source = make_source(tmp_path, visibility=1.0)
    source.store.send_batch([{"body": f"b{i}"} for i in range(20)])
    msgs = receive_all(source, 20)
    inflight = InFlight()
    inflight.add("src", [m.receipt_handle for m in msgs], [10] * 20, source.visibility_timeout)
    extended = []
    keeper = LeaseKeeper(inflight, [source], margin=0.5, on_extended=extended.append)
    keeper.start()
    try:
        time.sleep(3.0)  # three timeouts
        assert source.receive(10, 0.2) == []
    finally:
        keeper.stop()
    assert sum(extended) >= 20
    newest = inflight.pop("src", [m.receipt_handle for m in msgs])
    assert inflight.count == 0 and inflight.bytes == 0
    res = source.ack(newest)
    assert len(res.deleted) == 20 and not res.failed
    assert source.store.count()["total"] == 0


def test_without_leases_messages_come_back(tmp_path):
    source = make_source(tmp_path, visibility=0.5)
    source.store.send_batch([{"body": "x"}])
    first = receive_all(source, 1)
    time.sleep(0.8)
    again = receive_all(source, 1)
    assert again[0].message_id == first[0].message_id and again[0].receive_count == 2


def test_acker_waits_for_the_spark_commit(tmp_path):
    source = make_source(tmp_path, visibility=30)
    source.store.send_batch([{"body": f"b{i}"} for i in range(5)])
    msgs = receive_all(source, 5)
    inflight = InFlight()
    inflight.add("src", [m.receipt_handle for m in msgs], [1] * 5, 30)
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    journal.write(0, [("src", m.receipt_handle) for m in msgs])
    metrics = Metrics("j")
    acker = Acker(str(tmp_path / "ck"), journal, {"src": source}, {"src": 2}, inflight, metrics)
    assert acker.reconcile() == 0  # no commits/0 yet: nothing is deleted
    assert source.store.count()["in_flight"] == 5
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
    assert acker.reconcile() == 1
    assert source.store.count()["total"] == 0
    assert metrics.total("deletedMessages") == 5 and journal.pending() == []


def test_a_source_with_delete_message_off_keeps_its_messages(tmp_path):
    source = make_source(tmp_path, visibility=30)
    source.store.send_batch([{"body": f"b{i}"} for i in range(3)])
    msgs = receive_all(source, 3)
    inflight = InFlight()
    inflight.add("src", [m.receipt_handle for m in msgs], [1] * 3, 30)
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    journal.write(0, [("src", m.receipt_handle) for m in msgs])
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
    metrics = Metrics("j")
    acker = Acker(
        str(tmp_path / "ck"), journal, {"src": source}, {"src": 2}, inflight, metrics, keep=frozenset({"src"})
    )
    assert acker.reconcile() == 1 and journal.pending() == []
    assert source.store.count()["total"] == 3  # left for the consumer that deletes them
    assert metrics.total("keptMessages") == 3 and metrics.total("deletedMessages") == 0
    assert inflight.count == 0  # no longer leased by this job: their visibility runs out


def test_acker_counts_stale_handles_without_stopping(tmp_path):
    source = make_source(tmp_path, visibility=0.3)
    source.store.send_batch([{"body": "x"}])
    old = receive_all(source, 1)[0]
    time.sleep(0.5)
    new = receive_all(source, 1)[0]  # redelivered: the old handle is now stale
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    journal.write(3, [("src", old.receipt_handle), ("src", new.receipt_handle)])
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "ck" / "commits" / "3").write_text("v1\n{}")
    metrics = Metrics("j")
    acker = Acker(str(tmp_path / "ck"), journal, {"src": source}, {"src": 1}, InFlight(), metrics)
    assert acker.reconcile() == 1
    # Neither handle was received by this acker's process (a replay after a restart): the
    # refused one is a stale handle, not a failed delete.
    assert metrics.total("staleHandles") == 1 and metrics.total("failedDeletes") == 0
    assert metrics.total("deletedMessages") == 1
    assert source.store.count()["total"] == 0


def test_an_ack_waits_for_an_extension_under_way_and_deletes_with_its_new_handle():
    """MNS replaces a handle when its visibility changes: ack and extension must not cross."""
    import threading

    inflight = InFlight()
    inflight.add("s", ["h1", "h2"], [10, 20], visibility=0.0)
    assert sorted(inflight.due("s", 1.0)) == [("h1", "h1"), ("h2", "h2")]
    assert inflight.due("s", 1.0) == []  # a lease being extended is not handed out twice
    popped: list[str] = []
    acker = threading.Thread(target=lambda: popped.extend(inflight.pop("s", ["h1"])))
    acker.start()
    acker.join(0.5)
    assert acker.is_alive() and popped == []  # waits for the extension
    inflight.renewed("s", {"h1": "h1-v2"}, 30.0, attempted=["h1", "h2"])
    acker.join(10)
    assert popped == ["h1-v2"] and inflight.count == 1 and inflight.bytes == 20


def test_a_failed_extension_releases_waiting_acks(tmp_path):
    from ingest.errors import TransientError

    class Refusing:
        name, visibility_timeout = "s", 1.0

        def extend(self, handles, seconds):
            raise TransientError("queue unavailable")

    inflight = InFlight()
    inflight.add("s", ["h1"], [1], visibility=0.0)
    assert LeaseKeeper(inflight, [Refusing()], 0.5).tick() == 0
    assert inflight.due("s", 1.0) == [("h1", "h1")]  # no longer marked: the next tick tries again
    inflight.renewed("s", {}, 1.0, attempted=["h1"])
    assert inflight.pop("s", ["h1"], wait=0.0) == ["h1"] and inflight.count == 0


def test_a_failed_delete_stays_unresolved_until_the_redelivered_copy_is_deleted(tmp_path):
    """The drain's exit code: 3 while a message of a committed batch could not be deleted."""
    source = make_source(tmp_path, visibility=0.3)
    source.store.send_batch([{"body": "x"}, {"body": "y"}])
    first = receive_all(source, 2)
    inflight = InFlight()
    # The leases believe the handles still valid (an extension the queue did not apply), so
    # the deletes are sent, and refused.
    inflight.add("src", [m.receipt_handle for m in first], [1, 1], 30, [m.message_id for m in first])
    time.sleep(0.5)
    again = receive_all(source, 2)  # both redelivered: the first handles are stale now
    inflight.add("src", [m.receipt_handle for m in again], [1, 1], 30, [m.message_id for m in again])
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    metrics = Metrics("j")
    acker = Acker(str(tmp_path / "ck"), journal, {"src": source}, {"src": 0}, inflight, metrics)
    journal.write(0, [("src", m.receipt_handle) for m in first])
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
    assert acker.reconcile() == 1 and metrics.total("failedDeletes") == 2
    assert sorted(mid for _, mid in acker.unresolved) == sorted(m.message_id for m in first)
    journal.write(1, [("src", again[0].receipt_handle)])  # one copy dropped as a duplicate and acked
    (tmp_path / "ck" / "commits" / "1").write_text("v1\n{}")
    assert acker.reconcile() == 1
    assert list(acker.unresolved) == [("src", again[1].message_id)]
    assert source.store.count()["total"] == 1


def test_a_delete_call_that_fails_is_a_failed_delete_even_for_a_previous_runs_handles(tmp_path):
    class Denied:
        """A source double: the queue refuses the whole call (AccessDenied), not one entry."""

        name = "src"

        def ack(self, handles):
            from ingest.errors import FatalError

            raise FatalError("AccessDenied: not allowed to DeleteMessage")

    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    journal.write(0, [("src", "h-from-an-earlier-run")])
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
    metrics = Metrics("j")
    acker = Acker(str(tmp_path / "ck"), journal, {"src": Denied()}, {"src": 0}, InFlight(), metrics)
    assert acker.reconcile() == 1
    assert metrics.total("failedDeletes") == 1 and metrics.total("staleHandles") == 0


def committed(tmp_path, batch_id, pairs, journal=None):
    """Journal ``pairs`` as batch ``batch_id`` (in ``journal``, the acker's, if given: a journal
    lists its store once, then knows what it writes) and mark it committed by Spark; return the journal."""
    journal = journal or AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    journal.write(batch_id, pairs)
    (tmp_path / "ck" / "commits").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ck" / "commits" / str(batch_id)).write_text("v1\n{}")
    return journal


class Accepting:
    """A queue that, like SQS, answers success to every handle, but ``refused``, which it does not
    know (moto's answer for a handle it lost: two ReceiveMessage calls at once handed one message
    out twice, and moto's unlocked receive recorded one of the two handles only)."""

    name = "src"

    def __init__(self, refused: str | None = None) -> None:
        self.sent: list[str] = []
        self.refused = refused

    def ack(self, handles):
        self.sent += handles
        invalid = "ReceiptHandleIsInvalid: The input receipt handle is not a valid receipt handle."
        return AckResult(
            deleted=[h for h in handles if h != self.refused],
            failed={h: invalid for h in handles if h == self.refused},
        )


def test_a_handle_past_its_visibility_is_not_sent_and_its_copy_is_deleted(tmp_path):
    """SQS may answer success to a delete with a handle that is no longer the latest and keep
    the message: such a delete is not sent; the copy that comes back is deleted."""
    source = make_source(tmp_path, visibility=0.3)
    source.store.send_batch([{"body": "x"}, {"body": "y"}])
    first = receive_all(source, 2)
    inflight = InFlight()
    inflight.add("src", [m.receipt_handle for m in first], [1, 1], 0.3, [m.message_id for m in first])
    leased_until = time.monotonic() + 0.3
    again = receive_all(source, 2)  # the extensions were lost: both came back
    assert sorted(m.message_id for m in again) == sorted(m.message_id for m in first)
    inflight.add("src", [m.receipt_handle for m in again], [1, 1], 30, [m.message_id for m in again])
    wait_for(lambda: time.monotonic() > leased_until, 5, "the first leases' deadline")
    sent: list[str] = []
    deleting = source.ack
    source.ack = lambda handles: (sent.extend(handles), deleting(handles))[1]  # type: ignore[method-assign]
    metrics = Metrics("j")
    journal = committed(tmp_path, 0, [("src", m.receipt_handle) for m in first])
    acker = Acker(str(tmp_path / "ck"), journal, {"src": source}, {"src": 0}, inflight, metrics)
    assert acker.reconcile() == 1 and journal.pending() == []
    assert sent == [] and metrics.total("expiredHandles") == 2
    assert metrics.total("failedDeletes") == 0 and metrics.total("deletedMessages") == 0
    assert acker.unresolved == {}  # a copy deleted before this ack would leave it unresolved for good
    assert source.store.count()["total"] == 2  # nothing was deleted with the old handles
    committed(tmp_path, 1, [("src", again[0].receipt_handle)], journal)  # one copy dropped as a duplicate
    assert acker.reconcile() == 1
    assert sent == [again[0].receipt_handle] and metrics.total("deletedMessages") == 1
    assert source.store.count()["total"] == 1


def test_an_expired_handle_whose_copy_was_deleted_first_leaves_nothing_unresolved(tmp_path):
    """The copy can be acked before the original (a crash recovery, staged files read out of
    receive order): the run then ends with nothing left, and exit code 0."""

    inflight = InFlight()
    inflight.add("src", ["h2"], [1], 30, ["m1"])  # the copy, acked first
    inflight.add("src", ["h1"], [1], 0.0, ["m1"])  # the original, whose visibility has ended
    metrics, queue = Metrics("j"), Accepting()
    journal = committed(tmp_path, 0, [("src", "h2")])
    acker = Acker(str(tmp_path / "ck"), journal, {"src": queue}, {"src": 0}, inflight, metrics)
    assert acker.reconcile() == 1
    committed(tmp_path, 1, [("src", "h1")], journal)
    assert acker.reconcile() == 1
    assert queue.sent == ["h2"] and acker.unresolved == {}
    assert metrics.total("expiredHandles") == 1 and metrics.total("deletedMessages") == 1


def test_an_expired_handle_and_its_copy_in_one_batch_resolve_together(tmp_path):
    inflight = InFlight()
    inflight.add("src", ["h1"], [1], 0.0, ["m1"])  # its visibility has ended
    inflight.add("src", ["h2"], [1], 30, ["m1"])  # the copy that came back
    metrics, queue = Metrics("j"), Accepting()
    journal = committed(tmp_path, 0, [("src", "h1"), ("src", "h2")])
    acker = Acker(str(tmp_path / "ck"), journal, {"src": queue}, {"src": 0}, inflight, metrics)
    assert acker.reconcile() == 1
    assert queue.sent == ["h2"] and acker.unresolved == {}
    assert metrics.total("expiredHandles") == 1 and metrics.total("deletedMessages") == 1


def test_a_message_handed_out_twice_deleted_through_one_copy_is_resolved(tmp_path):
    """tests/integration/test_queue_outage.py once exited 3 (NOT ACKED) with the queue empty:
    one message came twice in one batch, one handle deleted it, the other was refused, and the
    refusal, recorded after the deletion, left the message unresolved for good."""
    inflight = InFlight()
    inflight.add("src", ["h1", "h2"], [1, 1], 30, ["m1", "m1"])  # both leases valid
    metrics = Metrics("j")
    journal = committed(tmp_path, 0, [("src", "h1"), ("src", "h2")])
    acker = Acker(
        str(tmp_path / "ck"), journal, {"src": Accepting(refused="h1")}, {"src": 0}, inflight, metrics
    )
    assert acker.reconcile() == 1
    assert acker.unresolved == {}
    assert metrics.total("deletedMessages") == 1 and metrics.total("staleHandles") == 1
    assert metrics.total("failedDeletes") == 0


def test_the_journal_lists_its_store_once(tmp_path):
    """The acker asks for pending journals every 50 ms; on S3 a listing is a LIST request, so the
    journal lists once (journals of a run before this one) and then keeps its own writes and acks."""
    AckJournal(str(tmp_path / "ck" / "mq_ingest")).write(3, [["q", "h3"]])  # left by a crashed run
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    listed = []
    listing = journal.store.list
    journal.store.list = lambda folder="": listed.append(folder) or listing(folder)  # type: ignore[method-assign]
    assert journal.pending() == [3]
    journal.write(4, [["q", "h4"]])
    journal.done(3)
    for _ in range(100):
        assert journal.pending() == [4]
    assert listed == ["acks"]
    assert AckJournal(str(tmp_path / "ck" / "mq_ingest")).pending() == [4]  # the store agrees
