"""The MNS emulator through the real aliyun-mns-sdk: queue APIs, signatures, handles, long polls, limits."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mns.mns_exception import MNSClientNetworkException, MNSServerException
from mns.queue import Message, QueueMeta

from tests.support.mns_server import AK_ID, AK_SECRET, account, create_queue

pytestmark = pytest.mark.integration


@pytest.fixture
def queue(mns):
    q = account(mns.url).get_queue(create_queue(mns.url, visibility_timeout=30))
    q.set_encoding(False)
    return q


def code_of(fn) -> str:
    with pytest.raises(MNSServerException) as err:
        fn()
    return err.value.type


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's own Queue.get_attributes
def test_queue_lifecycle(mns):
    q = account(mns.url).get_queue("lifecycle-1")
    meta = QueueMeta(vis_timeout=7, polling_wait_sec=3)
    assert q.create(meta) == f"{mns.url}/queues/lifecycle-1"
    assert q.create(meta) == f"{mns.url}/queues/lifecycle-1"  # same attributes: fine
    assert code_of(lambda: q.create(QueueMeta(vis_timeout=8))) == "QueueAlreadyExist"
    got = q.get_attributes()
    assert (got.visibility_timeout, got.polling_wait_seconds, got.maximum_message_size) == (7, 3, 65536)
    assert (got.queue_name, got.create_time > 0) == ("lifecycle-1", True)
    assert code_of(lambda: account(mns.url).get_queue("9-bad").create(QueueMeta())) == "InvalidQueueName"
    q.delete()
    assert code_of(q.get_attributes) == "QueueNotExist"
    assert code_of(lambda: q.send_message(Message("x"))) == "QueueNotExist"


def test_send_receive_fields_and_md5(queue):
    before = int(time.time() * 1000)
    sent = queue.send_message(Message("hello <&> 東京", priority=3))
    assert sent.message_body_md5 == hashlib.md5("hello <&> 東京".encode()).hexdigest().upper()
    (m,) = queue.batch_receive_message(16, 1)
    assert (m.message_id, m.message_body, m.priority, m.dequeue_count) == (
        sent.message_id,
        "hello <&> 東京",
        3,
        1,
    )
    assert m.message_body_md5 == sent.message_body_md5
    assert before <= m.enqueue_time <= m.first_dequeue_time
    assert m.next_visible_time >= m.first_dequeue_time + 30_000
    assert code_of(queue.peek_message) == "MessageNotExist"  # in flight: nothing visible


def test_base64_encoding_round_trips_through_the_sdk(mns):
    q = account(mns.url).get_queue(create_queue(mns.url))  # the SDK's default: base64 bodies
    q.send_message(Message("naïve – ✓"))
    (m,) = q.batch_receive_message(1, 1)
    assert m.message_body.decode() == "naïve – ✓"


def test_batch_limits_priority_order_and_peek(queue):
    bodies = [f"m{i}" for i in range(16)]
    assert len(queue.batch_send_message([Message(b, priority=16 - i) for i, b in enumerate(bodies)])) == 16
    assert code_of(lambda: queue.batch_send_message([Message("x")] * 17)) == "InvalidArgument"
    assert code_of(lambda: queue.batch_receive_message(17, 0)) == "InvalidArgument"
    assert [m.message_body for m in queue.batch_peek_message(3)] == ["m15", "m14", "m13"]
    assert queue.peek_message().dequeue_count == 0  # peeking changes nothing
    got = queue.batch_receive_message(16, 0)
    assert [m.message_body for m in got] == bodies[::-1]  # priority 1 first
    assert code_of(lambda: queue.batch_receive_message(16, 0)) == "MessageNotExist"


def test_handles_change_on_every_receive_and_visibility_change(mns):
    q = account(mns.url).get_queue(create_queue(mns.url, visibility_timeout=1))
    q.set_encoding(False)
    q.send_message(Message("again"))
    first = q.batch_receive_message(1, 1)[0]
    second = q.batch_receive_message(1, 3)[0]  # back after the 1 s visibility timeout
    assert second.receipt_handle != first.receipt_handle and second.dequeue_count == 2
    assert code_of(lambda: q.delete_message(first.receipt_handle)) == "ReceiptHandleError"
    changed = q.change_message_visibility(second.receipt_handle, 60)
    assert changed.receipt_handle not in (first.receipt_handle, second.receipt_handle)
    assert int(changed.next_visible_time) >= second.next_visible_time
    assert code_of(lambda: q.change_message_visibility(second.receipt_handle, 60)) == "ReceiptHandleError"
    assert code_of(lambda: q.change_message_visibility(changed.receipt_handle, 0)) == "InvalidArgument"
    q.delete_message(changed.receipt_handle)
    assert code_of(lambda: q.delete_message(changed.receipt_handle)) == "MessageNotExist"
    assert code_of(lambda: q.delete_message("1-bm90IGEgaGFuZGxl")) == "ReceiptHandleError"


def test_handles_with_plus_and_slash_work_in_query_strings(queue):
    queue.batch_send_message([Message(f"p{i}") for i in range(16)])
    msgs = queue.batch_receive_message(16, 1)
    tricky = [m for m in msgs if "+" in m.receipt_handle or "/" in m.receipt_handle]
    assert tricky, "random handles should often contain + or /"
    for m in tricky:
        renewed = queue.change_message_visibility(m.receipt_handle, 30)
        queue.delete_message(renewed.receipt_handle)


def test_long_poll_waits_and_returns_when_a_message_arrives(mns, queue):
    got: list = []
    poller = threading.Thread(target=lambda: got.extend(queue.batch_receive_message(16, 30)))
    poller.start()
    time.sleep(0.5)
    assert poller.is_alive() and not got  # still waiting, not answered "empty"
    sender = account(mns.url).get_queue(queue.queue_name)  # the SDK is not thread-safe: its own Account
    sender.set_encoding(False)
    sender.send_message(Message("wake up"))
    poller.join(timeout=20)  # far below the 30 s poll: only the send can have ended it
    assert not poller.is_alive() and [m.message_body for m in got] == ["wake up"]
    assert code_of(lambda: queue.batch_receive_message(16, 1)) == "MessageNotExist"


def test_delayed_message_is_hidden_until_its_delay_ends(queue):
    queue.send_message(Message("later", delay_seconds=1))
    assert code_of(queue.peek_message) == "MessageNotExist"
    assert [m.message_body for m in queue.batch_receive_message(16, 5)] == ["later"]


def test_64_kib_body_limit_per_message_and_per_batch(mns, queue):
    queue.send_message(Message("x" * 65536))
    assert code_of(lambda: queue.send_message(Message("x" * 65537))) == "InvalidArgument"
    assert code_of(lambda: queue.batch_send_message([Message("y" * 40000)] * 2)) == "InvalidArgument"
    small = account(mns.url).get_queue(create_queue(mns.url, maximum_message_size=1024))
    small.set_encoding(False)
    with pytest.raises(MNSServerException) as err:
        small.batch_send_message([Message("ok"), Message("z" * 2000), Message("fine")])
    assert [e.get("ErrorCode") for e in err.value.sub_errors] == [None, "InvalidArgument", None]
    assert sorted(m.message_body for m in small.batch_receive_message(16, 1)) == ["fine", "ok"]


def test_batch_delete_partial_failure_lists_each_failed_handle(queue):
    queue.batch_send_message([Message("a"), Message("b")])
    a, b = queue.batch_receive_message(16, 1)
    renewed = queue.change_message_visibility(a.receipt_handle, 30).receipt_handle
    bogus = "1-" + base64.b64encode(b"nope" * 5).decode()
    with pytest.raises(MNSServerException) as err:
        queue.batch_delete_message([a.receipt_handle, b.receipt_handle, bogus])
    assert err.value.type == "ReceiptHandleError"
    assert [(e["ReceiptHandle"], e["ErrorCode"]) for e in err.value.sub_errors] == [
        (a.receipt_handle, "ReceiptHandleError"),
        (bogus, "ReceiptHandleError"),
    ]
    queue.batch_delete_message([renewed])  # b went with the partly failed call; a with its new handle
    assert code_of(lambda: queue.batch_peek_message(16)) == "MessageNotExist"


def test_wrong_credentials_are_refused_and_change_nothing(mns, queue):
    wrong_secret = account(mns.url, secret="not-the-secret").get_queue(queue.queue_name)
    with pytest.raises(MNSServerException) as err:
        wrong_secret.send_message(Message("sneaky"))
    assert err.value.type == "SignatureDoesNotMatch" and err.value.request_id
    from mns.account import Account

    unknown = Account(mns.url, "someone-else", AK_SECRET).get_queue(queue.queue_name)
    assert code_of(lambda: unknown.peek_message()) == "InvalidAccessKeyId"
    assert code_of(queue.peek_message) == "MessageNotExist"


def test_replies_carry_lowercase_request_id_and_content_length(mns, queue):
    from mns.mns_http import RequestInternal
    from mns.mns_request import DeleteQueueRequest

    client = account(mns.url).get_client()
    name = create_queue(mns.url)
    req = RequestInternal("DELETE", f"/queues/{name}")
    client.build_header(DeleteQueueRequest(name), req)
    resp = client.http.send_request(req)
    assert resp.status == 204 and resp.header["Content-Length"] == "0" and resp.header["x-mns-request-id"]


def test_injected_faults(mns, queue):
    mns.store.inject("BatchReceiveMessage", "InternalError")
    assert code_of(lambda: queue.batch_receive_message(16, 0)) == "InternalError"
    mns.store.inject("BatchReceiveMessage", "drop")
    mns.store.inject("BatchReceiveMessage", "drop")  # the SDK re-sends once on a dropped connection
    with pytest.raises(MNSClientNetworkException):
        queue.batch_receive_message(16, 0)
    assert code_of(lambda: queue.batch_receive_message(16, 0)) == "MessageNotExist"  # then it works again


def test_command_line_prints_the_url_and_serves():
    args = ["--port", "0", "--access-key-id", AK_ID, "--access-key-secret", AK_SECRET, "--queue", "cli-q"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.emulators.mns", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],  # the checkout's root: the emulator is test code
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        q = account(url).get_queue("cli-q")
        q.send_message(Message("from the cli"))
        assert q.batch_receive_message(1, 1)[0].message_body == b"from the cli"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
