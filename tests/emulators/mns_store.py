"""In-memory MNS queues for the emulator: messages, visibility, receipt handles and long polling.

Semantics follow the MNS API reference: a receive hides a message for the queue's
``VisibilityTimeout`` and issues a new receipt handle; ChangeMessageVisibility (1–43200 s)
issues another and invalidates the old one; a handle is valid only until its
``NextVisibleTime``. Lower ``Priority`` values (1–16, default 8) are received first.
MessageRetentionPeriod is stored and reported, but messages do not expire. Every public
method is thread-safe; ``receive`` long-polls on one ``threading.Condition``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import itertools
import os
import re
import threading
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
_QUEUE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,255}$")
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


def _not_exist() -> MnsError:
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
            raise _not_exist()
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


class Store:
    """All queues of one emulated account."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queues: dict[str, Queue] = {}
        self.faults: list[Fault] = []
        self.closed = False
        self._seq = itertools.count(1)

    def inject(self, action: str, code: str = "InternalError", entries: set[int] | None = None) -> None:
        """Fail the next ``action`` request (e.g. ``BatchSendMessage``) as ``Fault`` describes."""
        with self.cond:
            self.faults.append(Fault(action, code, frozenset(entries) if entries is not None else None))

    def take_fault(self, action: str) -> Fault | None:
        with self.cond:
            found = next((f for f in self.faults if f.action == action), None)
            if found is not None:
                self.faults.remove(found)
            return found

    def close(self) -> None:
        """End every long poll at once."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _queue(self, name: str) -> Queue:
        if name not in self.queues:
            raise MnsError(404, "QueueNotExist", "The queue name you provided is not exist.")
        return self.queues[name]

    @staticmethod
    def _attrs(given: dict[str, str], attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = dict(attrs)
        for key, raw in given.items():
            if key == "LoggingEnabled":
                attrs[key] = str(raw).lower() == "true"
            elif key in QUEUE_DEFAULTS:
                attrs[key] = checked_int(key, raw, " bytes" if key == "MaximumMessageSize" else " seconds")
        return attrs

    def create_queue(self, name: str, given: dict[str, str]) -> bool:
        """Create; True if new, False if it exists with the same attributes (else QueueAlreadyExist)."""
        if not _QUEUE_NAME.match(name):
            raise MnsError(400, "InvalidQueueName", "The queue name you provided is invalid.")
        attrs = self._attrs(given, {**QUEUE_DEFAULTS, "LoggingEnabled": False})
        with self.cond:
            if name not in self.queues:
                self.queues[name] = Queue(name, attrs)
                return True
            if self.queues[name].attrs != attrs:
                raise MnsError(409, "QueueAlreadyExist", "The queue you want to create is already exist.")
            return False

    def get_attributes(self, name: str) -> dict[str, Any]:
        with self.cond:
            q, now = self._queue(name), now_ms()
            active = sum(1 for m in q.messages.values() if m.visible_ms <= now)
            delayed = sum(1 for m in q.messages.values() if m.visible_ms > now and not m.dequeue_count)
            counts = {"ActiveMessages": active, "DelayMessages": delayed}
            counts["InactiveMessages"] = len(q.messages) - active - delayed
            logging = "True" if q.attrs["LoggingEnabled"] else "False"
            times = {"CreateTime": q.created, "LastModifyTime": q.modified, "QueueName": q.name}
            return {**q.attrs, **counts, **times, "LoggingEnabled": logging}

    def delete_queue(self, name: str) -> None:
        with self.cond:
            self._queue(name)
            del self.queues[name]
            self.cond.notify_all()

    def send(self, name: str, entries: list[dict[str, Any]], fault: Fault | None = None) -> list[Any]:
        """Enqueue each entry (``body``, optional ``delay`` and ``priority``): its view, or an MnsError."""
        out: list[Any] = []
        with self.cond:
            q = self._queue(name)
            limit = q.attrs["MaximumMessageSize"]
            for i, entry in enumerate(entries):
                size = len(entry["body"].encode("utf-8"))
                if (err := fault and fault.hits(i)) or not 1 <= size <= limit:
                    out.append(err or invalid("MessageBody", 1, limit, " bytes"))
                    continue
                seq, now = next(self._seq), now_ms()
                delay = entry.get("delay", q.attrs["DelaySeconds"])
                msg_id = f"{os.urandom(8).hex().upper()}-1-{seq:X}"
                msg = Message(seq, msg_id, entry["body"], entry.get("priority", 8), now, now + delay * 1000)
                q.messages[seq] = msg
                heapq.heappush(
                    q.hidden if delay else q.ready, (msg.visible_ms if delay else msg.priority, seq, 0)
                )
                out.append(msg.view())
            self.cond.notify_all()
        return out

    def receive(self, name: str, n: int, wait_s: int | None) -> list[dict[str, Any]]:
        """Up to ``n`` messages, waiting up to ``wait_s`` (None: PollingWaitSeconds) for the first."""
        with self.cond:
            wait_s = self._queue(name).attrs["PollingWaitSeconds"] if wait_s is None else wait_s
            deadline = time.monotonic() + wait_s
            while True:
                q, now = self._queue(name), now_ms()
                q.promote(now)
                got: list[Any] = []
                while q.ready and len(got) < n:
                    msg = q.live(*heapq.heappop(q.ready)[1:])
                    if msg is not None:
                        msg.dequeue_count += 1
                        msg.first_dequeue_ms = msg.first_dequeue_ms or now
                        q.hide(msg, now + q.attrs["VisibilityTimeout"] * 1000)
                        got.append(msg.view())
                remaining = deadline - time.monotonic()
                if got or remaining <= 0 or self.closed:
                    if not got:
                        raise _not_exist()
                    return got
                if q.hidden:  # wake when the next hidden message turns visible
                    remaining = min(remaining, max(0.001, (q.hidden[0][0] - now_ms()) / 1000))
                self.cond.wait(remaining)

    def peek(self, name: str, n: int) -> list[dict[str, Any]]:
        """Up to ``n`` visible messages, in receive order, without changing them."""
        with self.cond:
            q = self._queue(name)
            q.promote(now_ms())
            live = (q.live(seq, gen) for _, seq, gen in sorted(q.ready))
            got = list(itertools.islice((m.view() for m in live if m is not None), n))
        if not got:
            raise _not_exist()
        return got

    def delete(self, name: str, handles: list[str], fault: Fault | None = None) -> list[MnsError | None]:
        """Delete by receipt handle; per handle None, or why not."""
        out: list[MnsError | None] = []
        with self.cond:
            q, now = self._queue(name), now_ms()
            for i, handle in enumerate(handles):
                try:
                    if err := fault and fault.hits(i):
                        raise err
                    del q.messages[q.current(handle, now).seq]
                    out.append(None)
                except MnsError as err:
                    out.append(err)
        return out

    def change_visibility(self, name: str, handle: str, seconds: int) -> tuple[str, int]:
        """Hide for ``seconds`` from now; return the new receipt handle and NextVisibleTime."""
        with self.cond:
            q, now = self._queue(name), now_ms()
            msg = q.current(handle, now)
            q.hide(msg, now + seconds * 1000)
            self.cond.notify_all()  # a poller may be sleeping until the old, later visibility time
            return msg.handle, msg.visible_ms
