"""The file-backed fake queue: a durable SQLite queue with SQS-like visibility, handles and FIFO groups."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from sources.base import AckResult, Received

DEDUP_WINDOW_MS = 5 * 60 * 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    body TEXT NOT NULL,
    attrs TEXT NOT NULL DEFAULT '{}',
    group_id TEXT,
    dedup_id TEXT,
    sent_ts INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    handle TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    first_receive_ts INTEGER
);
CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at, seq);
CREATE UNIQUE INDEX IF NOT EXISTS messages_handle ON messages (handle);
CREATE TABLE IF NOT EXISTS dedup (dedup_id TEXT PRIMARY KEY, message_id TEXT NOT NULL, ts INTEGER NOT NULL);
"""


def _now() -> int:
    return int(time.time() * 1000)


class FakeQueue:
    """A queue in one SQLite file, ``<path>/<queue>.db``, shared by threads and processes.

    Semantics follow SQS: a received message is hidden for the visibility timeout and gets
    a new receipt handle on every receive; a message not deleted comes back; deleting with
    a stale handle fails. FIFO queues deliver each group in send order, never while another
    message of the group is in flight, and drop re-sends of a dedup id (or, without one, of
    the same body) within 5 minutes.

    Guarantee: at-least-once. A message stays on disk until deleted with its current handle;
    WAL mode with ``synchronous=FULL`` makes each call durable before it returns.

    Connections are opened lazily, one per thread, and reopened after a fork; the object
    pickles without them, so it can be shipped to Spark executors.
    """

    def __init__(self, path: str, queue: str, fifo: bool = False) -> None:
        self.path = str(path)
        self.queue = queue
        self.fifo = fifo
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "queue": self.queue, "fifo": self.fifo}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["queue"], state["fifo"])

    @property
    def file(self) -> Path:
        return Path(self.path) / f"{self.queue}.db"

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        Path(self.path).mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.file, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.executescript(_SCHEMA)
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    # ----- producing -------------------------------------------------------------------

    def send(self, body: str, **kwargs: Any) -> str:
        """Enqueue one message; see ``send_batch`` for the keyword arguments."""
        return self.send_batch([{"body": body, **kwargs}])[0]

    def send_batch(self, entries: Sequence[dict[str, Any]]) -> list[str]:
        """Enqueue messages in one transaction; return their ids.

        Each entry: ``body`` (str), and optionally ``message_attributes`` (dict of str),
        ``group_id`` (required on FIFO queues), ``dedup_id``, ``delay_seconds`` and
        ``message_id``. Passing an existing ``message_id`` enqueues a second copy of that
        message: a fake-only way to simulate the duplicate deliveries of at-least-once queues.
        """
        now = _now()
        rows, ids = [], []
        for e in entries:
            if not isinstance(e.get("body"), str):
                raise ValueError("each message needs a string 'body'")
            group = e.get("group_id")
            if self.fifo and not group:
                raise ValueError(f"queue {self.queue} is FIFO: group_id is required")
            mid = e.get("message_id") or uuid.uuid4().hex
            dedup = e.get("dedup_id")
            if self.fifo and not dedup:
                dedup = hashlib.sha256(e["body"].encode()).hexdigest()
            attrs = orjson.dumps(e.get("message_attributes") or {}).decode()
            visible = now + int(float(e.get("delay_seconds") or 0) * 1000)
            rows.append((mid, e["body"], attrs, group, dedup, now, visible))
            ids.append(mid)
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            if self.fifo:
                ids = self._insert_fifo(db, rows, now)
            else:
                db.executemany(
                    "INSERT INTO messages (message_id, body, attrs, group_id, dedup_id, sent_ts, visible_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return ids

    def _insert_fifo(self, db: sqlite3.Connection, rows: list[tuple], now: int) -> list[str]:
        db.execute("DELETE FROM dedup WHERE ts < ?", (now - DEDUP_WINDOW_MS,))
        ids = []
        for row in rows:
            hit = db.execute("SELECT message_id FROM dedup WHERE dedup_id = ?", (row[4],)).fetchone()
            if hit:
                ids.append(hit[0])
                continue
            db.execute(
                "INSERT INTO messages (message_id, body, attrs, group_id, dedup_id, sent_ts, visible_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            db.execute("INSERT INTO dedup VALUES (?, ?, ?)", (row[4], row[0], now))
            ids.append(row[0])
        return ids

    # ----- consuming -------------------------------------------------------------------

    def receive(self, max_messages: int, wait_seconds: float, visibility_timeout: float) -> list[Received]:
        """Receive up to ``max_messages``, long-polling up to ``wait_seconds`` for the first one."""
        deadline = time.monotonic() + wait_seconds
        pause = 0.005
        while True:
            got = self._receive_once(max_messages, visibility_timeout)
            if got or time.monotonic() >= deadline:
                return got
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.05)

    def _receive_once(self, n: int, visibility: float) -> list[Received]:
        db = self._db()
        now = _now()
        if self.fifo:
            pick = (
                "SELECT seq FROM messages WHERE visible_at <= :now AND group_id NOT IN ("
                " SELECT group_id FROM messages WHERE receive_count > 0 AND visible_at > :now)"
                " ORDER BY seq LIMIT :n"
            )
        else:
            pick = "SELECT seq FROM messages WHERE visible_at <= :now ORDER BY visible_at, seq LIMIT :n"
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute(
                "UPDATE messages SET visible_at = :until, handle = lower(hex(randomblob(16))),"
                " receive_count = receive_count + 1, first_receive_ts = coalesce(first_receive_ts, :now)"
                f" WHERE seq IN ({pick})"
                " RETURNING seq, message_id, body, attrs, group_id, dedup_id, sent_ts, handle,"
                " receive_count, first_receive_ts",
                {"now": now, "n": n, "until": now + int(visibility * 1000)},
            ).fetchall()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        rows.sort(key=lambda r: r[0])
        return [self._received(r) for r in rows]

    def _received(self, r: tuple) -> Received:
        seq, mid, body, attrs, group, dedup, sent, handle, count, first = r
        attributes = {
            "SentTimestamp": str(sent),
            "ApproximateReceiveCount": str(count),
            "ApproximateFirstReceiveTimestamp": str(first),
        }
        if self.fifo:
            attributes |= {
                "MessageGroupId": group,
                "MessageDeduplicationId": dedup,
                "SequenceNumber": str(seq),
            }
        return Received(
            message_id=mid,
            receipt_handle=handle,
            body=body,
            md5=hashlib.md5(body.encode()).hexdigest(),
            sent_ts=sent,
            first_receive_ts=first,
            receive_count=count,
            enqueue_ts=sent,
            group_id=group,
            dedup_id=dedup,
            sequence_number=str(seq) if self.fifo else None,
            attributes=attributes,
            message_attributes=orjson.loads(attrs),
        )

    def delete(self, handles: Sequence[str]) -> AckResult:
        """Delete by current receipt handle; stale or unknown handles are reported, not raised."""
        result = AckResult()
        unique = list(dict.fromkeys(handles))
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found = {
                    h for (h,) in db.execute(f"SELECT handle FROM messages WHERE handle IN ({marks})", chunk)
                }
                db.execute(f"DELETE FROM messages WHERE handle IN ({marks})", chunk)
                for h in chunk:
                    if h in found:
                        result.deleted.append(h)
                    else:
                        result.failed[h] = "ReceiptHandleIsInvalid: stale or unknown receipt handle"
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return result

    def change_visibility(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        """Hide (or, with 0, release) messages from now; return ``{handle: handle}`` for those changed."""
        until = _now() + int(seconds * 1000)
        changed: dict[str, str] = {}
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            for h in dict.fromkeys(handles):
                if db.execute("UPDATE messages SET visible_at = ? WHERE handle = ?", (until, h)).rowcount:
                    changed[h] = h
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return changed

    # ----- inspecting ------------------------------------------------------------------

    def peek(self, n: int = 10) -> list[Received]:
        """Visible messages, oldest first, without receiving them."""
        rows = self._db().execute(
            "SELECT seq, message_id, body, attrs, group_id, dedup_id, sent_ts, handle, receive_count,"
            " first_receive_ts FROM messages WHERE visible_at <= ? ORDER BY seq LIMIT ?",
            (_now(), n),
        )
        return [self._received(r) for r in rows]

    def count(self) -> dict[str, int]:
        """Messages by state: visible, in_flight (received, hidden), delayed, total."""
        now = _now()
        sql = (
            "SELECT coalesce(sum(visible_at <= :now), 0),"
            " coalesce(sum(visible_at > :now AND receive_count > 0), 0),"
            " coalesce(sum(visible_at > :now AND receive_count = 0), 0) FROM messages"
        )
        visible, in_flight, delayed = self._db().execute(sql, {"now": now}).fetchone()
        total = visible + in_flight + delayed
        return {"visible": visible, "in_flight": in_flight, "delayed": delayed, "total": total}

    def purge(self) -> int:
        """Delete every message; return how many there were."""
        db = self._db()
        n = db.execute("DELETE FROM messages").rowcount
        db.execute("DELETE FROM dedup")
        return n
