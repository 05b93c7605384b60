"""In-memory MNS queues for the emulator: messages, visibility, receipt handles and long polling.

Semantics follow the MNS API reference: a receive hides a message for the queue's
``VisibilityTimeout`` and issues a new receipt handle; ChangeMessageVisibility (1–43200 s)
issues another and invalidates the old one; a handle is valid only until its
``NextVisibleTime``. Lower ``Priority`` values (1–16, default 8) are received first.
MessageRetentionPeriod is stored and reported, but messages do not expire. Every public
method is thread-safe; ``receive`` long-polls on one ``threading.Condition``.
"""

from __future__ import annotations

import heapq
import itertools
import os
import re
import threading
import time
from typing import Any

from tests.emulators.mns_queue import (
    QUEUE_DEFAULTS,
    Fault,
    Message,
    MnsError,
    Queue,
    checked_int,
    invalid,
    not_exist,
    now_ms,
)

_QUEUE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,255}$")


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
                        raise not_exist()
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
            raise not_exist()
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
