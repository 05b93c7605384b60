"""MnsSource against the emulator through aliyun-mns-sdk: concurrency, handles, bodies, errors, retries."""

from __future__ import annotations

import base64
import logging
import threading
import time

import pytest
from mns.queue import Message

from ingest.connector import Received
from ingest.errors import FatalError, TransientError
from sources.mns.source import MnsSource
from tests.support.mns_server import (
    AK_SECRET,
    account,
    create_queue,
    depth,
    send_bodies,
    source_cfg,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def make_source(mns):
    made: list[MnsSource] = []

    def make(queue: str, **options) -> MnsSource:
        made.append(MnsSource(source_cfg(mns.url, queue, **options)))
        return made[-1]

    yield make
    for source in made:
        source.close()


def receive_all(source: MnsSource, n: int, timeout: float = 20) -> list[Received]:
    got: list[Received] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += source.receive(16, 1)
    return got


def test_four_receivers_get_each_message_once_and_ack_all(mns, make_source):
    queue = create_queue(mns.url, visibility_timeout=60)
    send_bodies(mns.url, queue, [f"msg-{i}" for i in range(400)])
    source = make_source(queue, visibility_timeout=60)
    got: list[Received] = []
    failures: list[str] = []
    lock = threading.Lock()

    def receiver() -> None:
        while True:
            batch = source.receive(16, 1)
            if not batch:
                return
            res = source.ack([m.receipt_handle for m in batch])
            with lock:
                got.extend(batch)
                failures.extend(res.failed.values())

    threads = [threading.Thread(target=receiver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [m.message_id for m in got]
    assert len(ids) == 400 and len(set(ids)) == 400  # each received once
    assert sorted(m.body for m in got) == sorted(f"msg-{i}" for i in range(400))
    assert failures == [] and depth(mns.url, queue) == 0  # all acked, the queue is empty
    assert len(source._clients._made) == 4  # one SDK Account per receiver thread


def test_fields_and_attributes(mns, make_source):
    queue = create_queue(mns.url, visibility_timeout=1)
    send_bodies(mns.url, queue, ['{"a": 1}'])
    source = make_source(queue)
    first = receive_all(source, 1)[0]
    again = receive_all(source, 1)[0]  # redelivered after the 1 s visibility timeout
    assert again.message_id == first.message_id and again.receive_count == 2
    assert again.receipt_handle != first.receipt_handle
    assert (again.body, again.body_base64, again.priority) == ('{"a": 1}', False, 8)
    assert again.enqueue_ts == again.sent_ts and again.first_receive_ts == first.first_receive_ts
    a = again.attributes
    assert set(a) >= {"MessageId", "ReceiptHandle", "EnqueueTime", "FirstDequeueTime", "DequeueCount"}
    assert (a["DequeueCount"], a["Priority"], a["MessageBodyMD5"]) == ("2", "8", again.md5)
    assert a["EnqueueTime"] == str(again.enqueue_ts) and a["ReceiptHandle"] == again.receipt_handle
    assert source.visibility_timeout == 1  # the queue's attribute wins over the configured 30 s


def test_a_queue_visibility_shorter_than_configured_is_a_warning(mns, make_source, caplog):
    queue = create_queue(mns.url, visibility_timeout=5)
    source = make_source(queue, visibility_timeout=30)
    with caplog.at_level(logging.INFO, logger="sources.mns.source"):
        source.probe()
    assert source.visibility_timeout == 5
    (record,) = [r for r in caplog.records if queue in r.getMessage()]
    text = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "5s" in text and "30s" in text and "extended more often" in text
    caplog.clear()
    longer = create_queue(mns.url, visibility_timeout=60)
    with caplog.at_level(logging.INFO, logger="sources.mns.source"):
        make_source(longer, visibility_timeout=30).probe()  # the configured 30 s is used: no warning
    assert [r.levelno for r in caplog.records if longer in r.getMessage()] == [logging.INFO]


def test_bodies_binary_raw_and_undecoded(mns, make_source):
    queue = create_queue(mns.url)
    send_bodies(mns.url, queue, ["plain <text> that is not base64!"], encode=False)
    q = account(mns.url).get_queue(queue)
    q.set_encoding(False)
    q.send_message(Message(base64.b64encode(b"\x00\xff\xfe binary").decode()))
    got = {m.body: m.body_base64 for m in receive_all(make_source(queue), 2)}
    assert got == {"plain <text> that is not base64!": False, "AP/+IGJpbmFyeQ==": True}
    send_bodies(mns.url, queue, ["as sent"])
    (kept,) = receive_all(make_source(queue, base64_body=False), 1)
    assert (kept.body, kept.body_base64) == (base64.b64encode(b"as sent").decode(), False)


def test_expired_receipt_handle_is_a_failed_ack(mns, make_source):
    queue = create_queue(mns.url, visibility_timeout=1)
    send_bodies(mns.url, queue, ["late"])
    source = make_source(queue)
    msg = receive_all(source, 1)[0]
    time.sleep(1.3)  # the handle is valid only until NextVisibleTime
    res = source.ack([msg.receipt_handle])
    assert res.deleted == [] and res.failed[msg.receipt_handle].startswith("ReceiptHandleError")


def test_extend_returns_a_new_handle_and_the_old_one_stops_working(mns, make_source):
    queue = create_queue(mns.url, visibility_timeout=30)
    send_bodies(mns.url, queue, ["slow", "slower"])
    source = make_source(queue)
    msgs = receive_all(source, 2)
    renewed = source.extend([m.receipt_handle for m in msgs] + ["1-bm90IGEgaGFuZGxlIGF0IGFsbA=="], 60)
    assert set(renewed) == {m.receipt_handle for m in msgs}  # the bogus handle is left out
    assert all(new != old for old, new in renewed.items())
    old = msgs[0].receipt_handle
    restarted = make_source(queue)  # knows nothing of the renewal, as after a restart
    assert restarted.ack([old]).failed[old].startswith("ReceiptHandleError")
    res = source.ack([renewed[old], renewed[old]])  # the new handle deletes; duplicates are sent once
    assert res.deleted == [renewed[old]] and not res.failed
    # The source that renewed a handle resolves an old one to its successor (see the next test).
    assert source.ack([msgs[1].receipt_handle]).deleted == [msgs[1].receipt_handle]
    assert depth(mns.url, queue) == 0


def test_ack_crossing_concurrent_extends_still_deletes(mns, make_source):
    # The lease keeper may extend (so replace) handles the acker has already taken: each delete
    # then fails at MNS with ReceiptHandleError, and the source retries with the newest successor.
    queue = create_queue(mns.url, visibility_timeout=30)
    send_bodies(mns.url, queue, [f"x{i}" for i in range(64)])
    source = make_source(queue)
    handles = [m.receipt_handle for m in receive_all(source, 64)]
    current = dict(zip(handles, handles, strict=True))
    one_round, stop = threading.Event(), threading.Event()

    def lease_keeper() -> None:
        while not stop.is_set():
            renewed = source.extend(list(current.values()), 60)
            current.update({orig: renewed[cur] for orig, cur in current.items() if cur in renewed})
            one_round.set()

    keeper = threading.Thread(target=lease_keeper)
    keeper.start()
    one_round.wait(timeout=20)
    res = source.ack(handles)  # every one of these was replaced, some are being replaced right now
    stop.set()
    keeper.join()
    assert sorted(res.deleted) == sorted(handles) and not res.failed
    assert depth(mns.url, queue) == 0


def test_release_makes_visible_after_one_second(mns, make_source):
    queue = create_queue(mns.url, visibility_timeout=60)
    send_bodies(mns.url, queue, ["back"])
    source = make_source(queue)
    msg = receive_all(source, 1)[0]
    source.release([msg.receipt_handle])
    again = receive_all(source, 1, timeout=5)
    assert [m.message_id for m in again] == [msg.message_id]


def test_wrong_credentials_and_missing_queue_are_fatal_and_secret_free(mns, make_source):
    queue = create_queue(mns.url)
    wrong = make_source(queue, accessKeySecret="wrong-secret-value-42")
    with pytest.raises(FatalError) as err:
        wrong.receive(16, 0)
    text = str(err.value)
    assert queue in text and "SignatureDoesNotMatch" in text
    assert "wrong-secret-value-42" not in text and AK_SECRET not in text
    with pytest.raises(FatalError, match="QueueNotExist") as err:
        make_source("no-such-queue").receive(16, 0)
    assert "no-such-queue" in str(err.value)


def test_the_start_up_probe_finds_wrong_keys_and_a_missing_queue(mns, make_source):
    queue = create_queue(mns.url)
    make_source(queue).probe()  # reachable, keys right: no error
    with pytest.raises(FatalError, match="SignatureDoesNotMatch"):
        make_source(queue, accessKeySecret="wrong-secret-value-42").probe()
    with pytest.raises(FatalError, match="QueueNotExist"):
        make_source("no-such-queue").probe()


def test_the_start_up_probe_finds_a_denied_delete_and_deletes_nothing(mns, make_source):
    queue = create_queue(mns.url)
    send_bodies(mns.url, queue, ["kept"])
    make_source(queue).probe()  # deletes allowed: the probe's handle matches no message
    assert depth(mns.url, queue) == 1
    mns.store.inject("BatchDeleteMessage", "AccessDenied")  # a RAM policy that allows receive only
    with pytest.raises(FatalError) as err:
        make_source(queue).probe()
    text = str(err.value)
    assert queue in text and "BatchDeleteMessage" in text and "AccessDenied" in text
    mns.store.inject("BatchDeleteMessage", "AccessDenied")
    make_source(queue, delete_message=False).probe()  # it never deletes: no need to be allowed to
    assert mns.store.take_fault("BatchDeleteMessage") is not None  # no delete was sent


def test_transient_errors_are_retried_then_raised(mns, make_source):
    queue = create_queue(mns.url)
    send_bodies(mns.url, queue, ["survivor"])
    source = make_source(queue, max_retries=2)
    for _ in range(2):
        mns.store.inject("BatchReceiveMessage", "InternalError")
    assert [m.body for m in source.receive(16, 1)] == ["survivor"]
    for _ in range(3):
        mns.store.inject("BatchReceiveMessage", "ServiceUnavailable")
    with pytest.raises(TransientError, match="ServiceUnavailable"):
        source.receive(16, 0)


def test_ack_resends_only_the_entries_that_failed_for_a_retryable_reason(mns, make_source):
    queue = create_queue(mns.url)
    send_bodies(mns.url, queue, [f"d{i}" for i in range(20)])
    source = make_source(queue)
    msgs = receive_all(source, 20)
    mns.store.inject("BatchDeleteMessage", "InternalError", entries={1, 3})
    res = source.ack([m.receipt_handle for m in msgs])
    assert len(res.deleted) == 20 and not res.failed
    assert depth(mns.url, queue) == 0
