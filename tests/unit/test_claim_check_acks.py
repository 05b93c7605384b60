"""Claim-check acks without Spark: a payload is deleted only with its message, and the ack
journal's entries carry the payload refs of pointers only."""

from __future__ import annotations

import pyarrow as pa

from checkpoints.journal import AckJournal
from ingest.batch.books import journal_entries
from ingest.connector import AckResult
from ingest.connector.claim_check import INVALID_REF
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight
from ingest.metrics import Metrics
from tests.support.sqs_server import object_keys, store_for

# --- acks ------------------------------------------------------------------------------------


class HalfDeleting:
    """A queue that deletes every handle except those in ``refuse``."""

    name = "src"

    def __init__(self, refuse: set[str]) -> None:
        self.refuse = refuse

    def ack(self, handles):
        return AckResult(
            deleted=[h for h in handles if h not in self.refuse],
            failed={h: "ReceiptHandleIsInvalid" for h in handles if h in self.refuse},
        )


def acked(tmp_path, entries, queue, payloads) -> Metrics:
    """Journal ``entries`` as committed batch 0, ack it with a fresh journal reader (as after a
    restart: the entries come back from the file); return the acker's metrics."""
    AckJournal(str(tmp_path / "ck" / "mq_ingest")).write(0, entries)
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "ck" / "commits" / "0").write_text("v1\n{}")
    inflight = InFlight()
    handles = [e[1] for e in entries]
    inflight.add("src", handles, [1] * len(handles), 30, [f"id-{h}" for h in handles])
    metrics = Metrics("j")
    journal = AckJournal(str(tmp_path / "ck" / "mq_ingest"))
    acker = Acker(
        str(tmp_path / "ck"), journal, {"src": queue}, {"src": 0}, inflight, metrics, payloads=payloads
    )
    assert acker.reconcile() == 1 and journal.pending() == []
    return metrics


def pointer_entries(s3, bucket: str) -> list[tuple[str, ...]]:
    for k in ("p1", "p2", "p3"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"payload")
    return [
        ("src", "h1", f"{bucket}/p1"),
        ("src", "h2", f"{bucket}/p2"),
        ("src", "h-plain"),
        ("src", "h3", f"{bucket}/p3"),
        ("src", "h-invalid", INVALID_REF),
    ]


def test_payloads_are_deleted_only_for_messages_the_queue_deleted(tmp_path, moto_url, s3, bucket):
    entries = pointer_entries(s3, bucket)
    metrics = acked(tmp_path, entries, HalfDeleting({"h2"}), {"src": store_for(moto_url)})
    assert object_keys(s3, bucket) == {"p2"}  # its message is still on the queue: its payload must stay
    assert metrics.total("deletedMessages") == 4 and metrics.total("failedDeletes") == 1
    assert metrics.total("deletedPayloads") == 2 and metrics.total("failedPayloadDeletes") == 0


def test_without_delete_payload_no_object_is_deleted(tmp_path, s3, bucket):
    entries = pointer_entries(s3, bucket)
    metrics = acked(tmp_path, entries, HalfDeleting(set()), None)
    assert object_keys(s3, bucket) == {"p1", "p2", "p3"}
    assert metrics.total("deletedMessages") == 5 and metrics.total("deletedPayloads") == 0


# --- the ack journal's entries -------------------------------------------------------------


def test_journal_entries_carry_the_payload_ref_of_pointers_only():
    meta = pa.table(
        {
            "source": ["a", "a", "b", "b"],
            "receipt_handle": ["h1", "h2", "h3", "h4"],
            "payload_ref": pa.array([None, "bkt/k/1", None, INVALID_REF], pa.string()),
        }
    )
    assert journal_entries(meta) == [
        ("a", "h1"),
        ("a", "h2", "bkt/k/1"),
        ("b", "h3"),
        ("b", "h4", INVALID_REF),
    ]


def test_journal_entries_of_a_batch_without_pointers_are_pairs():
    meta = pa.table(
        {
            "source": ["a", "b"],
            "receipt_handle": ["h1", "h2"],
            "payload_ref": pa.array([None, None], pa.string()),
        }
    )
    assert journal_entries(meta) == [("a", "h1"), ("b", "h2")]
