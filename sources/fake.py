"""The fake-queue source (the embedded default) and the demo data seeded into it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import orjson

from ingest.config.sources import FakeSeed, FakeSourceConfig
from sources.base import AckResult, Received
from sources.fake_store import FakeQueue


class FakeSource:
    """Reads a file-backed fake queue; lets a job run locally with no cloud account.

    Guarantee: at-least-once delivery, as the real queues: a message is received again
    after its visibility timeout until it is acked with its current handle. ``extend``
    keeps the handle (like SQS). Several receiver threads and processes may share a queue.
    """

    def __init__(self, cfg: FakeSourceConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.queue = cfg.queue
        self.max_batch = cfg.batch_size
        self.visibility_timeout = cfg.visibility_timeout
        self.store = FakeQueue(cfg.path, cfg.queue, fifo=cfg.fifo)

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
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
        pass


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

    Deterministic (seeded RNG). With ``only_if_empty`` a queue that holds messages is left
    alone, so re-running the demo after a crash does not add more.
    """
    if seed.only_if_empty and queue.count()["total"] > 0:
        return {"messages": 0, "duplicates": 0, "malformed": 0}
    rng = random.Random(42)
    bodies = [demo_body(i, rng) for i in range(seed.messages)]
    group = {"group_id": "demo"} if queue.fifo else {}
    ids: list[str] = []
    for start in range(0, len(bodies), 1000):
        ids += queue.send_batch([{"body": b, **group} for b in bodies[start : start + 1000]])
    dups = [rng.randrange(len(ids)) for _ in range(seed.duplicates)] if ids else []
    if dups:
        queue.send_batch(
            [
                {"body": bodies[i], "message_id": ids[i], "dedup_id": f"dup-{k}", **group}
                for k, i in enumerate(dups)
            ]
        )
    bad = [{"body": f'{{"event_id": {seed.messages + k}, "broken": ', **group} for k in range(seed.malformed)]
    if bad:
        queue.send_batch(bad)
    return {"messages": len(ids), "duplicates": len(dups), "malformed": len(bad)}
