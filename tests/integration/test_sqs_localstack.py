"""SqsSource and the SQS sink writer on LocalStack where moto departs from SQS: FIFO order, dedup, limits."""

from __future__ import annotations

import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sinks.sqs.sink import SqsPartitionWriter, dedup_id
from sources.sqs.source import SqsSource
from tests.support.localstack_server import available
from tests.support.source_contract import Harness, SourceContract, receive_n, receive_none
from tests.support.sqs_server import FaultProxy, drain, send_bodies, sink_cfg, source_cfg

HAVE_LOCALSTACK, WHY_NOT = available()
if not HAVE_LOCALSTACK:
    print(WHY_NOT)
# One worker under xdist: one LocalStack process (~20 s to start, its own Python) for the suite.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not HAVE_LOCALSTACK, reason=WHY_NOT),
    pytest.mark.xdist_group("localstack"),
]
CREDS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
"""Dummy credentials: LocalStack accepts any (this key id maps to account 000000000000)."""
SOURCE_CREDS = {
    "sqs.credentials.provider": "static",
    "aws.access.key.id": "test",
    "aws.secret.access.key": "test",
}
SINK_CREDS = {
    "aws.credentials.provider": "static",
    "aws.credentials.provider.basic.accesskeyid": "test",
    "aws.credentials.provider.basic.secretkey": "test",
}


@pytest.fixture
def ls_sqs(localstack_url):
    import boto3

    client = boto3.client("sqs", endpoint_url=localstack_url, region_name="us-east-1", **CREDS)
    yield client
    client.close()


@pytest.fixture
def ls_queue(ls_sqs):
    """Create a fresh LocalStack queue (``fifo=True`` for FIFO); deleted after the test."""
    urls = []

    def make(fifo: bool = False, **attributes: str) -> str:
        name = f"ls-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
        if fifo:
            attributes.setdefault("FifoQueue", "true")
        url = ls_sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        urls.append(url)
        return url

    yield make
    for url in urls:
        ls_sqs.delete_queue(QueueUrl=url)


def ls_source(url: str, endpoint: str, **options) -> SqsSource:
    return SqsSource(source_cfg(url, endpoint, **SOURCE_CREDS, **options))


def counts(sqs, url: str) -> tuple[int, int]:
    """(visible, in flight) on the queue."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(attrs[names[0]]), int(attrs[names[1]])


def by_group(msgs) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in msgs:
        out.setdefault(m.group_id, []).append(m.body)
    return out


# (a) The source contract, standard and FIFO (one group per body, as for the fake FIFO queue).


class TestSqsLocalStackContract(SourceContract):
    fifo = False

    @pytest.fixture
    def harness(self, ls_sqs, ls_queue, localstack_url):
        url = ls_queue(fifo=self.fifo)
        source = ls_source(url, localstack_url, name="contract", visibility_timeout=2)
        group = (lambda i: f"g{i}") if self.fifo else None
        yield Harness(source, lambda bodies: send_bodies(ls_sqs, url, bodies, group=group))
        source.close()

    def test_bogus_handle_is_reported_not_raised(self, harness: Harness):
        """The suite's test, with a handle LocalStack can tell is bogus.

        LocalStack checks only a handle's form (base64 of four fields, this queue's ARN among
        them): the suite's handle with its tail changed still has that form, so LocalStack
        takes it for a stale handle and its delete succeeds, as SQS does for stale ones.
        LocalStack also reports an invalid handle with SenderFault false (SQS: true), so
        SqsSource retries that entry ``sqs.max.retries`` times before it reports it failed.
        """
        harness.send(["keep"])
        msg = receive_n(harness.source, 1)[0]
        bogus = "not-a-receipt-handle"
        res = harness.source.ack([bogus, msg.receipt_handle])
        assert "ReceiptHandleIsInvalid" in res.failed[bogus]
        assert res.deleted == [msg.receipt_handle]
        assert receive_none(harness.source, harness.source.visibility_timeout * 1.2) == []


class TestSqsLocalStackFifoContract(TestSqsLocalStackContract):
    fifo = True


# (b) FIFO order within each group across redeliveries, and SequenceNumbers.


def test_fifo_group_order_survives_release_and_lapse_and_sequence_numbers_rise(
    ls_sqs, ls_queue, localstack_url
):
    url = ls_queue(fifo=True)
    sent = [f"g{i % 3}-{i // 3}" for i in range(12)]  # interleaved: g0-0, g1-0, g2-0, g0-1, ...
    send_bodies(ls_sqs, url, sent, group=lambda i: f"g{i % 3}")
    expected = {g: [b for b in sent if b.startswith(g)] for g in ("g0", "g1", "g2")}
    src = ls_source(url, localstack_url, visibility_timeout=2)

    first = src.receive(7, 1)  # not acked, then released at once
    assert 0 < len(first) <= 7
    for g, bodies in by_group(first).items():
        assert bodies == expected[g][: len(bodies)], f"group {g} out of order on first delivery"
    src.release([m.receipt_handle for m in first])

    second = src.receive(10, 1)  # not acked either: left to lapse
    for g, bodies in by_group(second).items():
        assert bodies == expected[g][: len(bodies)], f"group {g} out of order after release"
    held = {m.group_id for m in second}
    more = receive_none(src, 0.5)  # a group with a message in flight yields nothing more
    assert not held & {m.group_id for m in more}
    time.sleep(src.visibility_timeout + 0.3)

    final = []
    deadline = time.monotonic() + 20
    while len(final) < 12 and time.monotonic() < deadline:
        batch = src.receive(10, 1)
        assert len(src.ack([m.receipt_handle for m in batch]).deleted) == len(batch)
        final += batch
    assert by_group(final) == expected, "per-group order after the visibility timeout lapsed"
    assert len({m.message_id for m in final}) == 12
    for m in final:  # one more receive for each earlier delivery
        earlier = sum(m.body in {x.body for x in d} for d in (first, second, more))
        assert m.receive_count == 1 + earlier, m.body

    # SequenceNumber: in Received.sequence_number (and its attributes), fixed per message,
    # strictly increasing in send order across the queue — moto hands out random ones.
    seq = {m.body: int(m.sequence_number) for m in final}
    assert all(m.attributes["SequenceNumber"] == m.sequence_number for m in final)
    assert [seq[b] for b in sent] == sorted(seq.values()) and len(set(seq.values())) == 12
    for m in first + second + more:
        assert int(m.sequence_number) == seq[m.body], "a redelivery keeps the message's SequenceNumber"
    assert {m.group_id for m in final} == {"g0", "g1", "g2"}
    assert [m.dedup_id for m in sorted(final, key=lambda m: seq[m.body])] == [f"d{i}" for i in range(12)]
    assert drain(ls_sqs, url) == [] and counts(ls_sqs, url) == (0, 0)
    src.close()


# (c) A replayed sink batch on a FIFO target: one copy, even after the first was consumed.


def test_fifo_sink_replay_leaves_one_copy_within_the_dedup_window(ls_sqs, ls_queue, localstack_url):
    url = ls_queue(fifo=True)
    data = [{"body": f"body-{i:02d}", "source_id": f"src-{i}", "group_id": f"g{i % 2}"} for i in range(12)]
    w = SqsPartitionWriter(sink_cfg(url, localstack_url, **SINK_CREDS))
    assert w.write(data) == (12, [])
    assert w.write(data) == (12, [])  # the replay: SQS accepts, and drops, every entry
    assert counts(ls_sqs, url) == (12, 0)
    got = drain(ls_sqs, url, attributes=True)
    assert [m["Body"] for m in got if m["Attributes"]["MessageGroupId"] == "g0"] == [
        r["body"] for r in data if r["group_id"] == "g0"
    ]
    assert sorted(m["Body"] for m in got) == [r["body"] for r in data]  # exactly one copy each
    for m in got:
        r = next(r for r in data if r["body"] == m["Body"])
        assert m["Attributes"]["MessageGroupId"] == r["group_id"]
        assert m["Attributes"]["MessageDeduplicationId"] == dedup_id(r["source_id"], r["body"])

    # Replayed after the first copies were received and deleted: still dropped (moto forgets
    # deleted messages and would deliver all 12 again); only the new row gets through.
    new = {"body": "body-new", "source_id": "src-new", "group_id": "g0"}
    assert SqsPartitionWriter(sink_cfg(url, localstack_url, **SINK_CREDS)).write([*data, new]) == (13, [])
    assert counts(ls_sqs, url) == (1, 0)
    assert drain(ls_sqs, url) == ["body-new"]
    assert counts(ls_sqs, url) == (0, 0)


# (d) Batch limits: LocalStack enforces 10 entries on every *Batch call, like SQS.


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_extend_release_and_ack_of_more_than_ten_handles_with_repeats(fifo, ls_sqs, ls_queue, localstack_url):
    """LocalStack refuses > 10 entries in every *Batch call (a whole-call 400: SqsSource would
    raise FatalError), so these calls passing shows the chunking. It accepts a handle twice in
    one call, so the proxy's record of the calls shows that each handle goes once per call."""
    url = ls_queue(fifo=fifo)
    sent = [f"m{i:02d}" for i in range(23)]
    send_bodies(ls_sqs, url, sent, group=(lambda i: f"g{i}") if fifo else None)
    with pytest.raises(ClientError, match="TooManyEntriesInBatchRequest"):  # the limit is real here
        ls_sqs.change_message_visibility_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": f"h{i}", "VisibilityTimeout": 1} for i in range(11)],
        )
    with FaultProxy(localstack_url) as proxy:
        src = ls_source(url, proxy.url, visibility_timeout=3)
        msgs = receive_n(src, 23)
        assert sorted(m.body for m in msgs) == sent
        handles = [m.receipt_handle for m in msgs]

        renewed = src.extend(handles + handles[:4] + handles[15:17], 30)
        assert renewed == {h: h for h in handles}
        time.sleep(src.visibility_timeout + 0.5)  # past the receive's own timeout: all still hidden
        assert receive_none(src, 0.5) == [] and counts(ls_sqs, url) == (0, 23)

        back = handles[:12]
        src.release(back + back[:3])  # 12 handles (two calls), 3 repeated
        again = receive_n(src, 12, timeout=10)
        assert sorted(m.body for m in again) == sorted(m.body for m in msgs[:12])
        assert all(m.receive_count == 2 for m in again)

        latest = {m.message_id: m.receipt_handle for m in msgs + again}
        final = list(latest.values())
        res = src.ack(final + final[:5] + final[20:] + final[:1])
        assert sorted(res.deleted) == sorted(final) and not res.failed
        assert receive_none(src, 1.0) == []
        src.close()
        changes = [
            [e["ReceiptHandle"] for e in c["Entries"]] for c in proxy.actions("ChangeMessageVisibilityBatch")
        ]
        deletes = [[e["ReceiptHandle"] for e in c["Entries"]] for c in proxy.actions("DeleteMessageBatch")]
    # The chunks of one operation run side by side, so they may arrive in any order.
    assert sorted(len(c) for c in changes[:3]) == [3, 10, 10]  # extend 23
    assert sorted(len(c) for c in changes[3:]) == [2, 10]  # release 12
    assert sorted(len(c) for c in deletes) == [3, 10, 10]
    assert all(len(set(c)) == len(c) for c in changes + deletes)
    assert sorted(h for c in deletes for h in c) == sorted(final)
    assert counts(ls_sqs, url) == (0, 0)
