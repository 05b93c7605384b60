"""Fake-queue CLI: send, peek, count and purge a local queue, to feed a local job by hand.

python -m ingest.fakeq --path data/queues --queue events send --file events.jsonl
echo '{"a": 1}' | python -m ingest.fakeq --path data/queues --queue events send
python -m ingest.fakeq --path data/queues --queue events count
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import IO, Any

import orjson

from sources.fake_store import FakeQueue

ENVELOPE_KEYS = {"body", "message_attributes", "group_id", "dedup_id", "delay_seconds", "message_id"}


class InputError(Exception):
    """A bad input line; the message names the file and line."""


def _entries(stream: IO[bytes], name: str, envelope: bool, group: str | None) -> Iterator[dict[str, Any]]:
    for lineno, raw in enumerate(stream, 1):
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            continue
        if not envelope:
            entry: dict[str, Any] = {"body": line.decode("utf-8")}
        else:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                raise InputError(f"{name}:{lineno}: not a JSON object: {err}") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("body"), str):
                raise InputError(f'{name}:{lineno}: an --envelope line needs a string "body"')
            unknown = set(entry) - ENVELOPE_KEYS
            if unknown:
                raise InputError(
                    f"{name}:{lineno}: unknown key(s) {sorted(unknown)}; allowed {sorted(ENVELOPE_KEYS)}"
                )
        if group and "group_id" not in entry:
            entry["group_id"] = group
        yield entry


def _send(q: FakeQueue, args: argparse.Namespace) -> int:
    name = args.file or "<stdin>"
    stream = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    sent, batch = 0, []
    try:
        for entry in _entries(stream, name, args.envelope, args.group):
            batch.append(entry)
            if len(batch) == 1000:
                sent += len(q.send_batch(batch))
                batch = []
        if batch:
            sent += len(q.send_batch(batch))
    finally:
        if args.file:
            stream.close()
    print(f"sent {sent} message(s) to {q.queue}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ingest.fakeq", description=__doc__.splitlines()[0])
    ap.add_argument("--path", required=True, help="directory of the queue files")
    ap.add_argument("--queue", required=True)
    ap.add_argument("--fifo", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)
    send = sub.add_parser("send", help="send JSON lines (a file or stdin), one message per line")
    send.add_argument("--file", help="JSON-lines file (default: stdin)")
    send.add_argument("--envelope", action="store_true", help='lines are {"body": ..., "group_id": ...}')
    send.add_argument("--group", help="group id for lines without one (FIFO queues)")
    peek = sub.add_parser("peek", help="print visible messages without receiving them")
    peek.add_argument("-n", type=int, default=10)
    sub.add_parser("count", help="print message counts by state")
    sub.add_parser("purge", help="delete every message")
    args = ap.parse_args(argv)
    q = FakeQueue(args.path, args.queue, fifo=args.fifo)
    try:
        if args.cmd == "send":
            return _send(q, args)
        if args.cmd == "peek":
            for m in q.peek(args.n):
                rec = {
                    "message_id": m.message_id,
                    "body": m.body,
                    "receive_count": m.receive_count,
                    "sent_ts": m.sent_ts,
                    "group_id": m.group_id,
                    "message_attributes": m.message_attributes,
                }
                print(orjson.dumps(rec).decode())
            return 0
        if args.cmd == "count":
            print(orjson.dumps(q.count()).decode())
            return 0
        print(f"purged {q.purge()} message(s) from {q.queue}")
        return 0
    except (InputError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
