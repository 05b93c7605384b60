"""Fake-queue CLI: send, peek, count and purge a local queue, to feed a local job by hand.

``send`` creates the queue; ``peek``, ``count`` and ``purge`` refuse one that does not exist
(exit 2), so a mistyped name is an error rather than an empty queue.

Examples:
    python -m ingest.fakeq --path data/queues --queue events send --file events.jsonl
    echo '{"a": 1}' | python -m ingest.fakeq --path data/queues --queue events send
    python -m ingest.fakeq --path data/queues --queue events.fifo --fifo send --envelope --group g1
    python -m ingest.fakeq --path data/queues --queue events peek -n 5
    python -m ingest.fakeq --path data/queues --queue events count
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import uuid
from collections.abc import Iterable
from typing import Any

import orjson

from sources.fake.rows import ENTRY_KEYS
from sources.fake.store import FakeQueue

SEND_BATCH = 1000


class InputError(Exception):
    """A bad input line; the message names the file and the line."""


def read_entries(
    lines: Iterable[bytes], name: str, queue: FakeQueue, *, envelope: bool, group: str | None
) -> list[dict[str, Any]]:
    """Turn JSON lines into ``send_batch`` entries, checking every one before anything is sent.

    Args:
        lines: The raw input lines.
        name: The input's name for error messages (a path or ``<stdin>``).
        queue: The target queue; entries are checked against it (FIFO needs a group).
        envelope: Lines are ``{"body": ..., "group_id": ...}`` objects; otherwise each
            non-empty line is one message body, verbatim.
        group: The group id of lines that carry none.

    Raises:
        InputError: A line is not UTF-8, not a valid envelope, or not sendable to ``queue``.
    """
    entries = []
    for lineno, raw in enumerate(lines, 1):
        where = f"{name}:{lineno}"
        try:
            line = raw.rstrip(b"\r\n").decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        if not line.strip():
            continue
        if envelope:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                raise InputError(f"{where}: not valid JSON: {err}") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
                raise InputError(f'{where}: an --envelope line is an object with a string "body"')
        else:
            entry = {"body": line}
        if group and entry.get("group_id") is None:
            entry["group_id"] = group
        try:
            queue.validate(entry)
        except ValueError as err:
            hint = " (give one per line or use --group)" if "group_id" in str(err) else ""
            raise InputError(f"{where}: {err}{hint}") from None
        entries.append(entry)
    return entries


def _send(queue: FakeQueue, args: argparse.Namespace) -> None:
    if args.file:
        with open(args.file, "rb") as f:
            entries = read_entries(f, args.file, queue, envelope=args.envelope, group=args.group)
    else:
        entries = read_entries(sys.stdin.buffer, "<stdin>", queue, envelope=args.envelope, group=args.group)
    for entry in entries:
        entry.setdefault("message_id", uuid.uuid4().hex)
    dropped = 0
    for start in range(0, len(entries), SEND_BATCH):
        batch = entries[start : start + SEND_BATCH]
        ids = queue.send_batch(batch)
        # A FIFO send deduplicated within the window answers with the earlier message's id.
        dropped += sum(mid != entry["message_id"] for mid, entry in zip(ids, batch, strict=True))
    note = f" ({dropped} deduplicated: already sent within 5 minutes)" if dropped else ""
    print(f"sent {len(entries)} message(s) to {queue.queue}{note}")


def _peek(queue: FakeQueue, n: int) -> None:
    for m in queue.peek(n):
        record = {
            "message_id": m.message_id,
            "body": m.body,
            "receive_count": m.receive_count,
            "sent_ts": m.sent_ts,
            "enqueue_ts": m.enqueue_ts,
            "group_id": m.group_id,
            "dedup_id": m.dedup_id,
            "sequence_number": m.sequence_number,
            "message_attributes": m.message_attributes,
        }
        sys.stdout.write(orjson.dumps(record).decode() + "\n")


def parser(prog: str = "python -m ingest.fakeq") -> argparse.ArgumentParser:
    """The command line: global queue options, then one of send, peek, count, purge."""
    ap = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--path", required=True, help="directory of the queue files (<path>/<queue>.db)")
    ap.add_argument("--queue", required=True, help="queue name")
    ap.add_argument("--fifo", action="store_true", help="the queue is FIFO (group ids, ordering, dedup)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    send = sub.add_parser("send", help="send JSON lines from a file or stdin, one message per line")
    send.add_argument("--file", help="JSON-lines file (default: stdin)")
    keys = ", ".join(sorted(ENTRY_KEYS))
    send.add_argument("--envelope", action="store_true", help=f"each line is an object with keys {keys}")
    send.add_argument("--group", help="group id for lines without one (FIFO queues)")
    peek = sub.add_parser("peek", help="print visible messages as JSON lines, without receiving them")
    peek.add_argument("-n", type=int, default=10, help="at most this many (default 10)")
    sub.add_parser("count", help="print message counts: visible, in_flight, delayed, total")
    sub.add_parser("purge", help="delete every message")
    return ap


def main(argv: list[str] | None = None, prog: str = "python -m ingest.fakeq") -> int:
    """Run the CLI; return the exit code (2 for bad input)."""
    args = parser(prog).parse_args(argv)
    try:
        queue = FakeQueue(args.path, args.queue, fifo=args.fifo)
    except ValueError as err:
        print(f"error: --queue: {err}", file=sys.stderr)
        return 2
    if args.cmd != "send" and not queue.file.is_file():
        # Reading (or purging) a mistyped name would create an empty queue and print zeros.
        print(
            f"error: queue {args.queue} does not exist: no file {queue.file} (send creates it)",
            file=sys.stderr,
        )
        return 2
    try:
        if args.cmd == "send":
            queue.create()  # before reading the input: a FIFO/standard mismatch fails at once
            _send(queue, args)
        elif args.cmd == "peek":
            _peek(queue, max(0, args.n))
        elif args.cmd == "count":
            print(orjson.dumps(queue.count()).decode())
        else:
            print(f"purged {queue.purge()} message(s) from {queue.queue}")
    except (InputError, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except sqlite3.Error as err:
        print(f"error: queue file {queue.file}: {err}", file=sys.stderr)
        return 1
    finally:
        queue.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
