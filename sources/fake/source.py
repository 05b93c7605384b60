"""The fake-queue source (the embedded default) and the demo data seeded into it."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import orjson

from ingest.connector import AckResult, Received, Source
from sources.fake.config import FakeSeed, FakeSourceConfig
from sources.fake.store import FakeQueue


class FakeSource(Source):
    """Reads a file-backed fake queue; lets a job run locally with no cloud account.

    Guarantee: at-least-once, as the real queues. A received message comes back after its
    visibility timeout until it is acked with its current handle; an acked message never
    comes back. ``extend`` keeps the handle (like SQS). Several receiver threads and
    processes may share one queue.
    """

    can_probe = False
    reports_lag = True

    def __init__(self, cfg: FakeSourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.queue = cfg.queue
        self.max_batch = cfg.batch_size
        self.visibility_timeout = cfg.visibility_timeout
        self.store = FakeQueue(cfg.path, cfg.queue, fifo=cfg.fifo)

    def prepare(self) -> str | None:
        """Seed the demo messages (``seed``) into the queue, if the config asks for them."""
        if self.cfg.seed is None:
            return None
        return f"seeded {self.name}: {seed_demo(self.store, self.cfg.seed)}"

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        """Up to ``max_messages`` (at most ``batch_size``), long-polling ``wait_seconds``."""
        return self.store.receive(min(max_messages, self.max_batch), wait_seconds, self.visibility_timeout)

    def ack(self, handles: Sequence[str]) -> AckResult:
        return self.store.delete(handles)

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        return self.store.change_visibility(handles, seconds)

    def release(self, handles: Sequence[str]) -> None:
        self.store.change_visibility(handles, 0)

    def lag(self) -> int:
        """Messages waiting on the queue (visible or delayed)."""
        c = self.store.count()
        return c["visible"] + c["delayed"]

    def close(self) -> None:
        self.store.close()


ACTIONS = ("click", "view", "purchase")


def demo_body(i: int, rng: random.Random) -> str:
    """One demo event, matching the demo schema in ``conf/local.yaml``."""
    ts = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=i * 1500 + rng.randrange(1000))
    return orjson.dumps(
        {
            "event_id": i,
            "user_id": rng.randrange(1, 500),
            "action": rng.choice(ACTIONS),
            "amount": round(rng.uniform(0, 200), 2),
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z",
        }
    ).decode()


def seed_demo(queue: FakeQueue, seed: FakeSeed) -> dict[str, int]:
    """Put demo events on ``queue``: good ones, redelivered duplicates (same id), malformed bodies.

    The good bodies decode to ``event_id BIGINT, user_id BIGINT, action STRING, amount
    DOUBLE, ts TIMESTAMP``; bodies and message ids are the same on every run of a queue (seeded
    RNGs, the ids' from the queue's name), so a job that drained the queue before drops a second
    seeding as duplicates of what it wrote. With ``only_if_empty`` a queue that holds messages is
    left alone, so restarting the demo after a crash adds nothing.

    Returns:
        How many of each kind were sent: ``messages``, ``duplicates``, ``malformed``.
    """
    if seed.only_if_empty and queue.count()["total"] > 0:
        return {"messages": 0, "duplicates": 0, "malformed": 0}
    rng = random.Random(42)
    bodies = [demo_body(i, rng) for i in range(seed.messages)]
    id_rng = random.Random(f"mq-ingest demo {queue.queue}")
    ids = [uuid.UUID(int=id_rng.getrandbits(128), version=4).hex for _ in bodies]
    dups = [rng.randrange(len(ids)) for _ in range(seed.duplicates)] if ids else []
    bad = [
        f'{{"event_id": {seed.messages + k}, "action": "click", "amount": ' if k % 2 else f"not json {k}"
        for k in range(seed.malformed)
    ]
    entries = [{"body": body, "message_id": mid} for body, mid in zip(bodies, ids, strict=True)]
    entries += [{"body": bodies[i], "message_id": ids[i]} for i in dups]
    entries += [
        {"body": body, "message_id": uuid.UUID(int=id_rng.getrandbits(128), version=4).hex} for body in bad
    ]
    if queue.fifo:  # every entry its own dedup id, or FIFO dedup would swallow the copies
        for k, entry in enumerate(entries):
            entry |= {"group_id": "demo", "dedup_id": f"{entry['message_id']}-{k}"}
    for start in range(0, len(entries), 1000):
        queue.send_batch(entries[start : start + 1000])
    return {"messages": len(ids), "duplicates": len(dups), "malformed": len(bad)}
