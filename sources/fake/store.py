"""The file-backed fake queue: a durable SQLite queue with SQS-like visibility, handles and FIFO groups."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ingest.connector import AckResult, Received
from sources.fake.db import COLUMNS, COUNT, INSERT, RECEIVE_FIFO, RECEIVE_STANDARD, Connections, transaction
from sources.fake.rows import entry_row, received

DEDUP_WINDOW_MS = 5 * 60 * 1000
"""A FIFO queue accepts but does not enqueue a dedup id it saw this recently (as SQS does)."""
STALE_HANDLE = "ReceiptHandleIsInvalid: stale or unknown receipt handle"
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")
"""Queue names stay file names inside the queue directory: no separators, no ``..``."""
_CHUNK = 500  # handles per IN (...) list, well under SQLite's host-parameter limit


def _now() -> int:
    return int(time.time() * 1000)


class FakeQueue:
    """A queue in one SQLite file, ``<path>/<queue>.db``, shared by threads and processes.

    It behaves like SQS: a received message is hidden for the visibility timeout and gets a
    new receipt handle on every receive; a message not deleted comes back with a higher
    receive count; deleting with a stale handle fails. FIFO queues deliver each group in
    send order, never while another message of the group is in flight, and accept but do
    not enqueue a dedup id (or, without one, a body) seen in the last 5 minutes.

    Guarantee: at-least-once. A message stays in the file until deleted with its current
    handle. Every call is one SQLite transaction in WAL mode with ``synchronous=NORMAL``:
    durable when a process is killed at any point; a power loss may undo the last calls.

    Connections are opened lazily, one per thread, and reopened after a fork; the object
    pickles without them, so it can be shipped to Spark executors.
    """

    def __init__(self, path: str, queue: str, fifo: bool = False) -> None:
        if not _QUEUE_NAME.fullmatch(queue) or set(queue) == {"."}:
            raise ValueError(f"queue name {queue!r}: use letters, digits, '_', '-' and '.' only")
        self.path = str(path)
        self.queue = queue
        self.fifo = fifo
        self.file = Path(self.path) / f"{queue}.db"
        """The queue's SQLite file."""
        self._conns = Connections(self.file, fifo)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "queue": self.queue, "fifo": self.fifo}

    def __setstate__(self, state: dict[str, Any]) -> None:
        FakeQueue.__init__(self, state["path"], state["queue"], state["fifo"])

    def __repr__(self) -> str:
        return f"FakeQueue({self.path!r}, {self.queue!r}, fifo={self.fifo})"

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return transaction(self._conns.get())

    def close(self) -> None:
        """Close this process's connections (no thread may be using them); later calls reopen."""
        self._conns.close()

    def create(self) -> None:
        """Create the queue's file if it is not there (checking its kind, FIFO or standard, if it is)."""
        self._conns.get()

    # ----- producing -------------------------------------------------------------------

    def send(
        self,
        body: str,
        *,
        message_attributes: dict[str, str] | None = None,
        group_id: str | None = None,
        dedup_id: str | None = None,
        delay_seconds: float = 0,
        message_id: str | None = None,
    ) -> str:
        """Enqueue one message and return its id.

        Args:
            body: The message body.
            message_attributes: String attributes delivered with the message.
            group_id: The message group; required on FIFO queues.
            dedup_id: FIFO deduplication id (default: sha256 of the body).
            delay_seconds: The message becomes visible this many seconds from now.
            message_id: Fake-only: reuse an existing message's id to enqueue a second copy of
                it, simulating the duplicate deliveries of an at-least-once queue. On a FIFO
                queue give the copy its own ``dedup_id`` or it is deduplicated away.

        Returns:
            The message id (a new uuid4 hex unless given); for a FIFO send deduplicated
            within the window, the id of the message first sent with that dedup id.

        Raises:
            ValueError: A bad argument, or a FIFO send without ``group_id``.
        """
        entry: dict[str, Any] = {"body": body, "message_attributes": message_attributes, "group_id": group_id}
        entry |= {"dedup_id": dedup_id, "delay_seconds": delay_seconds, "message_id": message_id}
        return self.send_batch([entry])[0]

    def send_batch(self, entries: Sequence[Mapping[str, Any]]) -> list[str]:
        """Enqueue messages in one transaction (all or none) and return their ids, in order.

        Args:
            entries: Dicts with ``body`` and optionally the keyword arguments of ``send``.

        Raises:
            ValueError: An entry is malformed; nothing is enqueued.
        """
        now = _now()
        rows = [entry_row(entry, now, fifo=self.fifo, queue=self.queue) for entry in entries]
        with self._write() as db:
            if not self.fifo:
                db.executemany(INSERT, rows)
                return [row[0] for row in rows]
            db.execute("DELETE FROM dedup WHERE ts < ?", (now - DEDUP_WINDOW_MS,))
            seen = self._seen(db, list({row[4] for row in rows}))
            ids, fresh = [], []
            for row in rows:
                if row[4] not in seen:  # first of its dedup id, also within this batch
                    seen[row[4]] = row[0]
                    fresh.append(row)
                ids.append(seen[row[4]])
            db.executemany(INSERT, fresh)
            db.executemany("INSERT INTO dedup VALUES (?, ?, ?)", [(r[4], r[0], now) for r in fresh])
            return ids

    @staticmethod
    def _seen(db: sqlite3.Connection, dedup_ids: list[str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for i in range(0, len(dedup_ids), _CHUNK):
            chunk = dedup_ids[i : i + _CHUNK]
            sql = f"SELECT dedup_id, message_id FROM dedup WHERE dedup_id IN ({','.join('?' * len(chunk))})"
            seen.update(db.execute(sql, chunk).fetchall())
        return seen

    def validate(self, entry: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` if ``send_batch`` would refuse this entry."""
        entry_row(entry, 0, fifo=self.fifo, queue=self.queue)

    # ----- consuming -------------------------------------------------------------------

    def receive(self, max_messages: int, wait_seconds: float, visibility_timeout: float) -> list[Received]:
        """Receive up to ``max_messages``, long-polling up to ``wait_seconds`` for the first.

        Each message returned is hidden for ``visibility_timeout`` seconds and carries a new
        receipt handle; only that handle deletes or changes it from now on.
        """
        if max_messages < 1 or visibility_timeout < 0:
            raise ValueError("max_messages must be >= 1 and visibility_timeout >= 0")
        deadline = time.monotonic() + wait_seconds
        pause = 0.005
        while True:
            got = self._receive_once(max_messages, visibility_timeout)
            left = deadline - time.monotonic()
            if got or left <= 0:
                return got
            time.sleep(min(pause, left))
            pause = min(pause * 1.5, 0.05)

    def _receive_once(self, n: int, visibility: float) -> list[Received]:
        now = _now()
        db = self._conns.get()
        # A read first, so idle pollers do not queue up for the write lock.
        if db.execute("SELECT 1 FROM messages WHERE visible_at <= ? LIMIT 1", (now,)).fetchone() is None:
            return []
        sql = RECEIVE_FIFO if self.fifo else RECEIVE_STANDARD
        with transaction(db):
            rows = db.execute(sql, {"now": now, "n": n, "until": now + int(visibility * 1000)}).fetchall()
        rows.sort()  # RETURNING promises no order; seq is send order
        return [received(row, fifo=self.fifo) for row in rows]

    def delete(self, handles: Sequence[str]) -> AckResult:
        """Delete messages by their current receipt handle; never raises for a bad handle.

        Returns:
            ``deleted``: the handles whose message is gone now; ``failed``: stale (the
            message was received again since) or unknown handles, with the reason.
        """
        unique = list(dict.fromkeys(handles))
        with self._write() as db:
            gone = self._by_handle(db, "DELETE FROM messages", unique)
        result = AckResult()
        for h in unique:
            if h in gone:
                result.deleted.append(h)
            else:
                result.failed[h] = STALE_HANDLE
        return result

    def change_visibility(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        """Hide messages for ``seconds`` from now (0 makes them visible at once).

        Returns:
            ``{handle: handle}`` for each current handle changed (the fake keeps handles,
            like SQS); stale and unknown handles are left out.
        """
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        unique = list(dict.fromkeys(handles))
        until = _now() + int(seconds * 1000)
        with self._write() as db:
            changed = self._by_handle(db, f"UPDATE messages SET visible_at = {until}", unique)
        return {h: h for h in unique if h in changed}

    @staticmethod
    def _by_handle(db: sqlite3.Connection, statement: str, handles: list[str]) -> set[str]:
        """Run ``statement`` on the messages whose current handle is one of ``handles``."""
        valid = [h for h in handles if isinstance(h, str) and h.partition("-")[0].isdigit()]
        hit: set[str] = set()
        for i in range(0, len(valid), _CHUNK):
            chunk = valid[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            # A handle begins with its message's seq, so the pair of IN lists matches exactly.
            sql = f"{statement} WHERE seq IN ({marks}) AND handle IN ({marks}) RETURNING handle"
            seqs = [int(h.partition("-")[0]) for h in chunk]
            hit.update(h for (h,) in db.execute(sql, [*seqs, *chunk]))
        return hit

    # ----- inspecting ------------------------------------------------------------------

    def peek(self, n: int = 10) -> list[Received]:
        """Up to ``n`` visible messages, oldest first, without receiving them (no handle)."""
        sql = f"SELECT {COLUMNS} FROM messages WHERE visible_at <= ? ORDER BY seq LIMIT ?"
        rows = self._conns.get().execute(sql, (_now(), n)).fetchall()
        return [received((*row[:8], None, *row[9:]), fifo=self.fifo) for row in rows]

    def count(self) -> dict[str, int]:
        """Messages by state: ``visible``, ``in_flight`` (received, hidden), ``delayed``, ``total``."""
        total, in_flight, delayed = self._conns.get().execute(COUNT, {"now": _now()}).fetchone()
        return {
            "visible": total - in_flight - delayed,
            "in_flight": in_flight,
            "delayed": delayed,
            "total": total,
        }

    def purge(self) -> int:
        """Delete every message (and the FIFO dedup history); return how many messages there were."""
        with self._write() as db:
            db.execute("DELETE FROM dedup")
            return db.execute("DELETE FROM messages").rowcount
