"""The fake queue's SQLite layer: schema, statements, and per-thread connections that survive fork."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA_VERSION = 2
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL, body TEXT NOT NULL,
        attrs TEXT NOT NULL DEFAULT '{}', group_id TEXT, dedup_id TEXT, sent_ts INTEGER NOT NULL,
        visible_at INTEGER NOT NULL, handle TEXT, receive_count INTEGER NOT NULL DEFAULT 0,
        first_receive_ts INTEGER, delay_ms INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS messages_visible ON messages (visible_at, seq)",
    # Handles start with the message's seq and are found through it; an index on random
    # handles made every receive and delete rewrite pages all over the file.
    "DROP INDEX IF EXISTS messages_handle",
    "CREATE TABLE IF NOT EXISTS dedup"
    " (dedup_id TEXT PRIMARY KEY, message_id TEXT NOT NULL, ts INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS dedup_ts ON dedup (ts)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
COLUMNS = "seq, message_id, body, attrs, group_id, dedup_id, sent_ts, delay_ms, handle, receive_count"
COLUMNS += ", first_receive_ts"
"""The columns every read returns, in the order ``FakeQueue`` unpacks them."""
INSERT = (
    "INSERT INTO messages (message_id, body, attrs, group_id, dedup_id, sent_ts, delay_ms, visible_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
PICK_STANDARD = "SELECT seq FROM messages WHERE visible_at <= :now ORDER BY visible_at, seq LIMIT :n"
# FIFO: a group with a message in flight is locked; a group whose earlier message is still
# delayed delivers nothing from that message on. ``cut`` is the first seq a group may not deliver.
PICK_FIFO = """SELECT m.seq FROM messages m LEFT JOIN (
        SELECT group_id, min(CASE WHEN receive_count > 0 THEN 0 ELSE seq END) AS cut
        FROM messages WHERE visible_at > :now GROUP BY group_id) b ON b.group_id = m.group_id
    WHERE m.visible_at <= :now AND (b.cut IS NULL OR m.seq < b.cut) ORDER BY m.seq LIMIT :n"""
_RECEIVE = (
    "UPDATE messages SET visible_at = :until, handle = seq || '-' || lower(hex(randomblob(12))),"
    " receive_count = receive_count + 1, first_receive_ts = coalesce(first_receive_ts, :now)"
    " WHERE seq IN ({pick}) RETURNING " + COLUMNS
)
RECEIVE_STANDARD = _RECEIVE.format(pick=PICK_STANDARD)
RECEIVE_FIFO = _RECEIVE.format(pick=PICK_FIFO)
"""Hide the next messages until ``:until`` under a fresh random receipt handle, and return them."""
COUNT = (
    "SELECT (SELECT count(*) FROM messages), coalesce(sum(receive_count > 0), 0),"
    " coalesce(sum(receive_count = 0), 0) FROM messages WHERE visible_at > :now"
)
"""All messages, then the hidden ones (in flight, delayed) in one read: the hidden are found through
the ``visible_at`` index, so the cost follows what is in flight, not the backlog (a scan of a
million-message queue took ~180 ms, ~7 ms this way)."""

_orphans: list[sqlite3.Connection] = []
# Connections inherited over fork are kept here, never used nor closed: closing one in the
# child could drop the parent's locks or checkpoint its WAL behind its back.
_caches: weakref.WeakSet[Connections] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cache in list(_caches):
        cache._forget_parent()


os.register_at_fork(after_in_child=_after_fork_in_child)


def open_db(file: Path, fifo: bool) -> sqlite3.Connection:
    """Open (creating or upgrading the schema if needed) a queue file in WAL mode, autocommit.

    ``synchronous=NORMAL`` makes each commit durable when the process is killed; only a
    power loss or OS crash may undo the last commits.

    Raises:
        ValueError: The file holds a FIFO queue and ``fifo`` is false, or the other way round.
    """
    file.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(file, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    _set_wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        with transaction(conn):
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
                if columns and "delay_ms" not in columns:  # a queue file of schema version 1
                    conn.execute("ALTER TABLE messages ADD COLUMN delay_ms INTEGER NOT NULL DEFAULT 0")
                for statement in SCHEMA:
                    conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('fifo', ?)", (str(fifo).lower(),))
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    kind = conn.execute("SELECT value FROM meta WHERE key = 'fifo'").fetchone()
    if kind and kind[0] != str(fifo).lower():
        conn.close()
        want = "FIFO" if kind[0] == "true" else "standard"
        raise ValueError(f"{file} holds a {want} queue: open it with fifo={kind[0] == 'true'}")
    return conn


def _set_wal(conn: sqlite3.Connection, deadline_s: float = 30.0) -> None:
    """``journal_mode=WAL``, retried: SQLite answers "database is locked" at once, without its busy
    handler, while another connection is creating the file, so a process opening the queue just
    as another creates it must wait its turn instead of failing."""
    deadline = time.monotonic() + deadline_s
    delay = 0.01
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(0.5, delay * 2)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction, taken at once (``BEGIN IMMEDIATE``): committed, or rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Connections:
    """One connection per thread to one file, opened on first use and reopened after a fork.

    Holds no connection until asked, and none survives pickling (the owner drops it).
    """

    def __init__(self, file: Path, fifo: bool) -> None:
        self.file = file
        self.fifo = fifo
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[sqlite3.Connection] = []
        self._pid = os.getpid()
        _caches.add(self)

    def _forget_parent(self) -> None:
        self._lock = threading.Lock()  # another thread of the parent may have held it
        _orphans.extend(self._open)
        self._open, self._pid, self._local = [], os.getpid(), threading.local()

    def get(self) -> sqlite3.Connection:
        """This thread's connection."""
        pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == pid:
            return conn
        if self._pid != pid:  # forked behind Python's back: no at-fork hook ran
            self._forget_parent()
        conn = open_db(self.file, self.fifo)
        with self._lock:
            self._open.append(conn)
        self._local.conn, self._local.pid = conn, pid
        return conn

    def close(self) -> None:
        """Close this process's connections (no thread may be using them); later calls reopen."""
        if self._pid != os.getpid():
            self._forget_parent()
        with self._lock:
            conns, self._open, self._local = self._open, [], threading.local()
        for conn in conns:
            conn.close()
