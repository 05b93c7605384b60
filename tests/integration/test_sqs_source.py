"""SqsSource against moto's server on 127.0.0.1 through awscrt and boto3 (and a fault proxy where needed)."""

from __future__ import annotations

import base64
import hashlib
import logging

import pytest

from ingest.errors import FatalError
from sources.sqs.source import SqsSource
from tests.support.source_contract import receive_n
from tests.support.sqs_server import FaultProxy, drain, send_bodies, source_cfg

pytestmark = pytest.mark.integration
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYSECRET1"


CLIENTS = pytest.mark.parametrize("client", ["crt", "boto3"])
"""``sqs.client``: awscrt (the default) and plain boto3 must read, fail and sign alike."""


@CLIENTS
def test_every_system_and_message_attribute_arrives(client, sqs, make_queue, moto_url):
    url = make_queue()
    sqs.send_message(
        QueueUrl=url,
        MessageBody="héllo",
        MessageAttributes={
            "s": {"DataType": "String", "StringValue": "text"},
            "n": {"DataType": "Number", "StringValue": "-4.5"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
            "c": {"DataType": "String.custom", "StringValue": "x"},
        },
    )
    src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30, **{"sqs.client": client}))
    m = receive_n(src, 1)[0]
    assert m.body == "héllo" and m.md5 == hashlib.md5("héllo".encode()).hexdigest()
    assert m.message_attributes == {
        "s": "text",
        "n": "-4.5",
        "b": "binary:" + base64.b64encode(b"\x00\xff").decode(),
        "c": "x",
    }
    assert m.message_attribute_types == {"s": "String", "n": "Number", "b": "Binary", "c": "String.custom"}
    assert set(m.attributes) >= {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
    }
    assert all(isinstance(v, str) for v in m.attributes.values())
    assert m.sent_ts == int(m.attributes["SentTimestamp"]) == m.enqueue_ts
    assert m.first_receive_ts == int(m.attributes["ApproximateFirstReceiveTimestamp"]) >= m.sent_ts
    assert m.receive_count == 1 and m.sender_id == m.attributes["SenderId"]
    assert m.group_id is m.dedup_id is m.sequence_number is None
    src.release([m.receipt_handle])
    again = receive_n(src, 1)[0]
    assert again.receive_count == 2 and again.first_receive_ts == m.first_receive_ts
    assert src.ack([again.receipt_handle]).deleted == [again.receipt_handle]


def test_fifo_fields_and_attempt_id_reused_only_on_retry(sqs, make_queue, moto_url):
    url = make_queue(fifo=True)
    send_bodies(sqs, url, ["m0", "m1", "m2"], group=lambda i: "g")
    with FaultProxy(moto_url, faults=["503", "drop"]) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, visibility_timeout=30))
        first = src.receive(10, 1)
        second = src.receive(10, 0)  # the group is locked while m0..m2 are in flight
        attempt_ids = [r.get("ReceiveRequestAttemptId") for r in proxy.actions("ReceiveMessage")]
    assert len(attempt_ids) == 4 and attempt_ids[0]
    assert attempt_ids[0] == attempt_ids[1] == attempt_ids[2] != attempt_ids[3]
    assert [m.body for m in first] == ["m0", "m1", "m2"] and second == []
    assert {m.group_id for m in first} == {"g"} and [m.dedup_id for m in first] == ["d0", "d1", "d2"]
    assert all(m.sequence_number for m in first)
    assert len(src.ack([m.receipt_handle for m in first]).deleted) == 3


def test_ack_chunks_of_ten_each_handle_once(sqs, make_queue, moto_url):
    url = make_queue()
    send_bodies(sqs, url, [f"m{i}" for i in range(23)])
    with FaultProxy(moto_url) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, visibility_timeout=30))
        handles = [m.receipt_handle for m in receive_n(src, 23)]
        res = src.ack(handles + handles[:3] + handles[7:9])
        calls = proxy.actions("DeleteMessageBatch")
    assert sorted(res.deleted) == sorted(handles) and not res.failed
    # The chunks are sent concurrently (sqs.max.inflight.requests), so they may arrive in any order.
    assert sorted(len(c["Entries"]) for c in calls) == [3, 10, 10]
    assert sorted(e["ReceiptHandle"] for c in calls for e in c["Entries"]) == sorted(handles)
    for call in calls:
        assert len({e["Id"] for e in call["Entries"]}) == len({e["ReceiptHandle"] for e in call["Entries"]})
        assert len({e["ReceiptHandle"] for e in call["Entries"]}) == len(call["Entries"])
    assert drain(sqs, url) == []


def test_bogus_handle_is_failed_not_raised(sqs, make_queue, moto_url):
    url = make_queue()
    send_bodies(sqs, url, ["keep"])
    src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30))
    msg = receive_n(src, 1)[0]
    assert src.extend(["bogus-handle"], 60) == {}
    res = src.ack(["bogus-handle", msg.receipt_handle])
    assert res.deleted == [msg.receipt_handle]
    assert "ReceiptHandleIsInvalid" in res.failed["bogus-handle"]


def test_only_failed_entries_are_retried(sqs, make_queue, moto_url):
    url = make_queue()
    send_bodies(sqs, url, [f"m{i}" for i in range(6)])
    with FaultProxy(moto_url) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, visibility_timeout=30))
        handles = [m.receipt_handle for m in receive_n(src, 6)]
        proxy.faults = ["fail_entries"]
        res = src.ack(handles)
        calls = [[e["ReceiptHandle"] for e in c["Entries"]] for c in proxy.actions("DeleteMessageBatch")]
    assert sorted(res.deleted) == sorted(handles) and not res.failed
    assert calls == [handles, handles[1::2]]
    assert drain(sqs, url) == []


def _fatal_text(err: pytest.ExceptionInfo) -> str:
    texts, e = [], err.value
    while e is not None:
        texts.append(str(e))
        e = e.__cause__
    return "\n".join(texts)


def test_missing_queue_is_fatal_at_once_and_both_clients_say_the_same(moto_url):
    url = moto_url + "/123456789012/no-such-queue"
    creds = {"sqs.credentials.provider": "static", "aws.access.key.id": "AKIAEXAMPLE0000001"}
    texts = []
    for client in ("crt", "boto3"):
        with FaultProxy(moto_url) as proxy:
            options = {"aws.secret.access.key": SECRET, "sqs.client": client}
            src = SqsSource(source_cfg(url, proxy.url, **creds, **options))
            with pytest.raises(FatalError) as err:
                src.receive(10, 1)
            assert len(proxy.actions("ReceiveMessage")) == 1  # fatal: not retried
        assert url in str(err.value) and "NonExistentQueue" in str(err.value)
        assert SECRET not in _fatal_text(err)
        texts.append(str(err.value))
    assert texts[0] == texts[1]


@CLIENTS
def test_wrong_credentials_and_access_denied_are_fatal(client, sqs, make_queue, moto_url):
    """moto checks signatures only with IAM authentication on (process-wide, restored after).

    Exercised: InvalidClientTokenId (unknown key), SignatureDoesNotMatch (wrong secret),
    AccessDenied (a user without a policy). UnrecognizedClientException is what real SQS
    says for an unknown key; moto never returns it, so only the classifier's table covers it.
    """
    import boto3
    from moto.core.authorization import enable_iam_authentication

    url = make_queue()
    iam = boto3.client("iam", endpoint_url=moto_url, region_name="us-east-1")
    iam.create_user(UserName=f"no-rights-{client}")
    key = iam.create_access_key(UserName=f"no-rights-{client}")["AccessKey"]
    cases = [
        ("AKIAUNKNOWN000000001", SECRET, "InvalidClientTokenId"),
        (key["AccessKeyId"], SECRET, "SignatureDoesNotMatch"),
        (key["AccessKeyId"], key["SecretAccessKey"], "AccessDenied"),
    ]
    with enable_iam_authentication():
        for key_id, secret, code in cases:
            creds = {"aws.access.key.id": key_id, "aws.secret.access.key": secret, "sqs.client": client}
            with pytest.raises(FatalError) as err:
                SqsSource(source_cfg(url, moto_url, **creds)).receive(1, 1)
            assert code in str(err.value) and url in str(err.value)
            assert secret not in _fatal_text(err)


@CLIENTS
@pytest.mark.parametrize("provider", ["static", "profile", "assume_role"])
def test_credentials_providers_through_an_authenticated_proxy(
    provider, client, sqs, make_queue, moto_url, tmp_path, monkeypatch
):
    url = make_queue()
    send_bodies(sqs, url, ["via-proxy"])
    options = {"sqs.credentials.provider": provider, "sqs.client": client}
    if provider == "static":
        options |= {"aws.access.key.id": "AKIASTATIC0000000001", "aws.secret.access.key": SECRET}
        expected = "AKIASTATIC0000000001"
    elif provider == "profile":
        creds = tmp_path / "credentials"
        creds.write_text(f"[p]\naws_access_key_id = AKIAPROFILE000000001\naws_secret_access_key = {SECRET}\n")
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        options |= {"aws.profile": "p"}
        expected = "AKIAPROFILE000000001"
    else:
        options |= {"sqs.role.arn": "arn:aws:iam::123456789012:role/reader", "sqs.sts.endpoint.url": moto_url}
        expected = "ASIA"  # temporary credentials from STS
    with FaultProxy(moto_url) as proxy:
        proxied = {"sqs.proxy.url": proxy.url, "sqs.proxy.user": "u@x", "sqs.proxy.password": "p:w"}
        src = SqsSource(source_cfg(url, moto_url, visibility_timeout=30, **options, **proxied))
        msg = receive_n(src, 1)[0]
        src.ack([msg.receipt_handle])
        src.close()
        headers = next(h for action, _, h in proxy.calls if action == "ReceiveMessage")
    assert msg.body == "via-proxy"
    assert headers["Proxy-Authorization"] == "Basic " + base64.b64encode(b"u@x:p:w").decode()
    assert f"Credential={expected}" in headers["Authorization"]
    assert ("X-Amz-Security-Token" in headers) == (provider == "assume_role")


def test_delete_max_retries_bounds_the_deletes_and_sqs_max_retries_the_rest(sqs, make_queue, moto_url):
    """Reference option ``deleteMaxRetries`` governs DeleteMessageBatch; ``sqs.max.retries`` the others."""
    url = make_queue()
    send_bodies(sqs, url, ["a", "b"])
    options = {"visibility_timeout": 30, "deleteMaxRetries": 1, "sqs.max.retries": 4}
    with FaultProxy(moto_url) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, **options))
        handles = [m.receipt_handle for m in receive_n(src, 2)]
        proxy.faults = ["503"] * 3
        res = src.ack(handles)  # 2 tries (deleteMaxRetries 1), both 503: reported failed, not raised
        assert sorted(res.failed) == sorted(handles) and not res.deleted
        assert len(proxy.actions("DeleteMessageBatch")) == 2
        proxy.faults = ["503"] * 3
        assert src.extend(handles, 60) == {h: h for h in handles}  # 4 retries outlast 3 faults
        assert len(proxy.actions("ChangeMessageVisibilityBatch")) == 4


def test_short_polling_asks_with_wait_time_zero(sqs, make_queue, moto_url):
    url = make_queue()
    with FaultProxy(moto_url) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, **{"sqs.waittime.seconds": 0}))
        assert src.receive(10, src.cfg.poll_wait) == []
        assert [c["WaitTimeSeconds"] for c in proxy.actions("ReceiveMessage")] == [0]


def test_a_start_up_probe_finds_credentials_that_may_not_delete(sqs, make_queue, moto_url):
    """Real IAM on moto: a user allowed to receive but not to delete is refused before the job
    reads anything (every ack would fail); a user allowed both passes the probe."""
    import json

    import boto3
    from moto.core.authorization import enable_iam_authentication

    from ingest.errors import FatalError

    url = make_queue()
    send_bodies(sqs, url, ["untouched"])
    iam = boto3.client("iam", endpoint_url=moto_url, region_name="us-east-1")
    keys = {}
    for user, actions in (
        ("reader", ["sqs:ReceiveMessage", "sqs:GetQueueAttributes"]),
        ("worker", ["sqs:*"]),
    ):
        iam.create_user(UserName=user)
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        }
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        keys[user] = {
            "aws.access.key.id": key["AccessKeyId"],
            "aws.secret.access.key": key["SecretAccessKey"],
        }
    with enable_iam_authentication():
        with pytest.raises(FatalError) as err:
            SqsSource(source_cfg(url, moto_url, **keys["reader"])).probe()
        SqsSource(source_cfg(url, moto_url, **keys["worker"])).probe()
        # A source that leaves deletion to another consumer needs no delete permission.
        SqsSource(source_cfg(url, moto_url, delete_message=False, **keys["reader"])).probe()
    assert url in str(err.value) and "sqs:DeleteMessage denied" in str(err.value)
    assert keys["reader"]["aws.secret.access.key"] not in str(err.value)
    assert [m.body for m in receive_n(SqsSource(source_cfg(url, moto_url)), 1)] == ["untouched"]


def test_the_acker_sends_no_delete_for_a_handle_past_its_visibility_and_deletes_the_copy(
    tmp_path, sqs, make_queue, moto_url
):
    """SQS answers success to a delete with a handle that is no longer the message's latest,
    yet may keep the message: no such delete is sent; the copy that came back is deleted."""
    import time

    from checkpoints.journal import AckJournal
    from ingest.intake.acker import Acker
    from ingest.intake.leases import InFlight
    from ingest.metrics import Metrics
    from tests.support.polling import wait_for

    def commit(batch_id: int, handle: str) -> None:
        journal.write(batch_id, [("src", handle)])
        (tmp_path / "ck" / "commits").mkdir(parents=True, exist_ok=True)
        (tmp_path / "ck" / "commits" / str(batch_id)).write_text("v1\n{}")

    url = make_queue()
    send_bodies(sqs, url, ["late"])
    with FaultProxy(moto_url) as proxy:
        src = SqsSource(source_cfg(url, proxy.url, visibility_timeout=1))
        (first,) = receive_n(src, 1)
        inflight = InFlight()
        inflight.add("src", [first.receipt_handle], [4], src.visibility_timeout, [first.message_id])
        leased_until = time.monotonic() + src.visibility_timeout
        (copy,) = receive_n(src, 1)  # back after 1 s: no lease keeper extended it
        assert copy.message_id == first.message_id and copy.receive_count == 2
        inflight.add("src", [copy.receipt_handle], [4], 30, [copy.message_id])
        wait_for(lambda: time.monotonic() > leased_until, 5, "the first lease's deadline")
        journal, metrics = AckJournal(str(tmp_path / "ck" / "mq_ingest")), Metrics("j")
        acker = Acker(str(tmp_path / "ck"), journal, {"src": src}, {"src": 0}, inflight, metrics)
        commit(0, first.receipt_handle)
        assert acker.reconcile() == 1
        assert proxy.actions("DeleteMessageBatch") == [] and metrics.total("expiredHandles") == 1
        assert acker.unresolved == {}
        commit(1, copy.receipt_handle)  # the copy, dropped as a duplicate
        assert acker.reconcile() == 1
        sent = [e["ReceiptHandle"] for c in proxy.actions("DeleteMessageBatch") for e in c["Entries"]]
        assert sent == [copy.receipt_handle] and acker.unresolved == {}
        src.close()
    assert drain(sqs, url) == []


def test_at_debug_botocore_logs_no_key_id_or_signature_unless_asked_by_name(make_queue, moto_url, capsys):
    """``--log-level DEBUG`` is for mq-ingest's loggers; ``--debug-logger botocore`` asks for botocore's."""
    from ingest.runtime.console import setup_logging

    key_id = "AKIADEBUGLOGGED00001"
    credentials = {
        "sqs.credentials.provider": "static",
        "aws.access.key.id": key_id,
        "aws.secret.access.key": SECRET,
    }
    cfg = source_cfg(make_queue(), moto_url, **{"sqs.client": "boto3"}, **credentials)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        seen = {}
        for asked in ((), ("botocore",)):
            setup_logging("DEBUG", asked)
            src = SqsSource(cfg)
            assert src.receive(10, 0) == []
            src.close()
            logging.getLogger("sources.sqs").debug("ours at DEBUG")
            seen[asked] = capsys.readouterr().err
    finally:
        setup_logging("INFO")  # our loggers and botocore's back to their defaults
        root.handlers[:], root.level = handlers, level
    assert "ours at DEBUG" in seen[()]
    assert key_id not in seen[()] and "Signature=" not in seen[()] and "DEBUG botocore" not in seen[()]
    assert key_id in seen[("botocore",)], "asked for by name, botocore's DEBUG lines are shown"
