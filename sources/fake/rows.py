"""The fake queue's rows: a send entry checked into a ``messages`` row, a row read back as ``Received``."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from ingest.connector import Received

ENTRY_KEYS = frozenset({"body", "message_attributes", "group_id", "dedup_id", "delay_seconds", "message_id"})


def _optional_str(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is None or (isinstance(value, str) and value):
        return value
    raise ValueError(f"{key} must be a non-empty string, got {value!r}")


def entry_row(entry: Mapping[str, Any], now: int, *, fifo: bool, queue: str) -> tuple:
    """The ``messages`` row (``sources.fake.db.INSERT``) of a send entry at ``now`` (epoch ms).

    Args:
        entry: ``body`` and optionally the keyword arguments of ``FakeQueue.send``.
        now: the send time; the row turns visible at ``now`` plus the entry's delay.
        fifo: the queue is FIFO: a ``group_id`` is required, a missing ``dedup_id`` is the
            body's sha256.
        queue: the queue's name, for the error message.

    Raises:
        ValueError: the entry is malformed.
    """
    body = entry.get("body")
    if not isinstance(body, str):
        raise ValueError(f"a message body must be a string, got {type(body).__name__}")
    if len(entry) == 1 and not fifo:  # the common case: just a body
        return (uuid.uuid4().hex, body, "{}", None, None, now, 0, now)
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ValueError(f"unknown message key(s) {sorted(unknown)}; allowed: {sorted(ENTRY_KEYS)}")
    attrs = entry.get("message_attributes") or {}
    if not isinstance(attrs, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()
    ):
        raise ValueError(f"message_attributes must map strings to strings, got {attrs!r}")
    group, dedup = _optional_str(entry, "group_id"), _optional_str(entry, "dedup_id")
    if fifo and group is None:
        raise ValueError(f"queue {queue} is FIFO: every message needs a group_id")
    if fifo and dedup is None:
        dedup = hashlib.sha256(body.encode()).hexdigest()
    delay = entry.get("delay_seconds") or 0
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
        raise ValueError(f"delay_seconds must be a number >= 0, got {delay!r}")
    delay_ms = int(delay * 1000)
    mid = _optional_str(entry, "message_id") or uuid.uuid4().hex
    attrs_json = orjson.dumps(attrs).decode() if attrs else "{}"
    return (mid, body, attrs_json, group, dedup, now, delay_ms, now + delay_ms)


def received(row: tuple, *, fifo: bool) -> Received:
    """A row of ``sources.fake.db.COLUMNS`` as the ``Received`` a receive returns (SQS's attribute names)."""
    seq, mid, body, attrs, group, dedup, sent, delay_ms, handle, count, first = row
    attributes = {"SentTimestamp": str(sent), "ApproximateReceiveCount": str(count)}
    if first is not None:
        attributes["ApproximateFirstReceiveTimestamp"] = str(first)
    if fifo:
        attributes |= {
            "MessageGroupId": group,
            "MessageDeduplicationId": dedup,
            "SequenceNumber": str(seq),
        }
    return Received(
        message_id=mid,
        receipt_handle=handle or "",
        body=body,
        md5=hashlib.md5(body.encode()).hexdigest(),
        sent_ts=sent,
        first_receive_ts=first,
        receive_count=count,
        enqueue_ts=sent + delay_ms,
        group_id=group,
        dedup_id=dedup,
        sequence_number=str(seq) if fifo else None,
        attributes=attributes,
        message_attributes=orjson.loads(attrs) if attrs != "{}" else {},
    )
