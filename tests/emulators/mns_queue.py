"""The MNS emulator's data: limits and error replies, a message, one queue's heaps and receipt handles.

A receive hides a message for the queue's ``VisibilityTimeout`` under a new receipt handle,
and a handle is valid only until its ``NextVisibleTime`` (``Queue.hide``, ``Queue.current``).
Lower ``Priority`` values (1–16, default 8) are received first. Nothing here locks: the
``Store`` (``tests.emulators.mns_store``) calls it under its condition.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import os
import time
from dataclasses import dataclass, field
from typing import Any

BATCH_MAX = 16
BATCH_BYTES_MAX = 65536
"""BatchSendMessage: at most 16 messages and 64 KB of message bodies per request."""
QUEUE_DEFAULTS = {"VisibilityTimeout": 30, "MaximumMessageSize": 65536, "MessageRetentionPeriod": 345600}
QUEUE_DEFAULTS |= {"DelaySeconds": 0, "PollingWaitSeconds": 0}
LIMITS = {"VisibilityTimeout": (1, 43200), "MaximumMessageSize": (1024, 65536), "DelaySeconds": (0, 604800)}
LIMITS |= {"MessageRetentionPeriod": (60, 604800), "PollingWaitSeconds": (0, 30), "Priority": (1, 16)}
LIMITS |= {"numOfMessages": (1, BATCH_MAX), "waitseconds": (0, 30)}
"""Valid ranges of queue attributes and request parameters (MNS API reference)."""
_HANDLE_BYTES = 19


class MnsError(Exception):
    """An MNS error reply: HTTP status, error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


def invalid(name: str, low: int, high: int, unit: str = "") -> MnsError:
    """The InvalidArgument error MNS returns for an out-of-range value."""
    return MnsError(400, "InvalidArgument", f"The value of {name} should between {low} and {high}{unit}.")


def checked_int(name: str, raw: Any, unit: str = "") -> int:
    """``raw`` as an int within ``LIMITS[name]``, or InvalidArgument."""
    low, high = LIMITS[name]
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise invalid(name, low, high, unit)
    return value


def now_ms() -> int:
    return int(time.time() * 1000)


def _not_valid() -> MnsError:
    return MnsError(400, "ReceiptHandleError", "The receipt handle you provide is not valid.")


def not_exist() -> MnsError:
    return MnsError(404, "MessageNotExist", "Message not exist.")


@dataclass(eq=False)
class Message:
    seq: int
    message_id: str
    body: str
    priority: int
    enqueue_ms: int
    visible_ms: int
    gen: int = 0
    """Bumped on every receive and visibility change: heap entries of older gens are stale."""
    dequeue_count: int = 0
    first_dequeue_ms: int = 0
    handle: str = ""

    def view(self) -> dict[str, Any]:
        """The reply fields, copied under the store lock (replies render outside it)."""
        md5 = hashlib.md5(self.body.encode("utf-8")).hexdigest().upper()
        return {
            **{"MessageId": self.message_id, "ReceiptHandle": self.handle, "MessageBodyMD5": md5},
            **{"MessageBody": self.body, "EnqueueTime": self.enqueue_ms, "NextVisibleTime": self.visible_ms},
            **{"FirstDequeueTime": self.first_dequeue_ms, "DequeueCount": self.dequeue_count},
            "Priority": self.priority,
        }


@dataclass(eq=False)
class Queue:
    name: str
    attrs: dict[str, Any]
    created: int = field(default_factory=lambda: int(time.time()))
    modified: int = field(default_factory=lambda: int(time.time()))
    messages: dict[int, Message] = field(default_factory=dict)
    ready: list[tuple[int, int, int]] = field(default_factory=list)
    """Heap of (priority, seq, gen): messages visible now."""
    hidden: list[tuple[int, int, int]] = field(default_factory=list)
    """Heap of (visible_ms, seq, gen): delayed or in-flight messages."""

    def live(self, seq: int, gen: int) -> Message | None:
        msg = self.messages.get(seq)
        return msg if msg is not None and msg.gen == gen else None

    def promote(self, now: int) -> None:
        """Move messages whose visibility (or delay) ended to the ready heap."""
        while self.hidden and self.hidden[0][0] <= now:
            _, seq, gen = heapq.heappop(self.hidden)
            if (msg := self.live(seq, gen)) is not None:
                heapq.heappush(self.ready, (msg.priority, seq, gen))

    def hide(self, msg: Message, until_ms: int) -> None:
        """Hide until ``until_ms`` under a new receipt handle (the old one stops working)."""
        msg.gen += 1
        msg.visible_ms = until_ms
        # Random bytes make '+', '/' and '=' common, as in real handles: clients must not URL-decode them.
        msg.handle = (
            "1-" + base64.b64encode(msg.seq.to_bytes(8, "big") + os.urandom(_HANDLE_BYTES - 8)).decode()
        )
        heapq.heappush(self.hidden, (until_ms, msg.seq, msg.gen))

    def current(self, handle: str, now: int) -> Message:
        """The message ``handle`` is the valid handle of; MessageNotExist or ReceiptHandleError if none."""
        try:
            raw = base64.b64decode(handle.removeprefix("1-"), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if not handle.startswith("1-") or len(raw) != _HANDLE_BYTES:
            raise _not_valid()
        msg = self.messages.get(int.from_bytes(raw[:8], "big"))
        if msg is None:
            raise not_exist()
        if msg.handle != handle or msg.visible_ms <= now:
            raise _not_valid()
        return msg


@dataclass
class Fault:
    """An injected failure, consumed by the next request of ``action``.

    ``entries`` None fails the whole request with ``code`` (``drop``: the connection closes
    without a reply); otherwise only those entry indexes of a batch call fail with ``code``.
    """

    action: str
    code: str = "InternalError"
    entries: frozenset[int] | None = None

    def hits(self, index: int) -> MnsError | None:
        return (
            MnsError(500, self.code, "Injected failure.") if self.entries and index in self.entries else None
        )
