"""The counter source: a bounded, in-memory queue of numbered JSON events with visibility timeouts."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Sequence

from ingest.connector import AckResult, Received, Source
from mq_ingest_example.config import CounterSourceConfig


class CounterSource(Source):
    """Events 0 … ``messages``-1; one not acked in time comes back, as on a queue."""

    can_probe = False
    reports_lag = True
    bounded = True

    def __init__(self, cfg: CounterSourceConfig) -> None:
        self.cfg, self.name, self.queue = cfg, cfg.name, f"counter:{cfg.name}"
        self.max_batch, self.visibility_timeout = 100, cfg.visibility_timeout
        self._ready = threading.Condition()
        self._next = 0
        self._back: deque[int] = deque()  # released or timed out: received again first
        self._hidden: dict[str, tuple[int, float]] = {}  # handle → (event, visible again at)
        self._acked: set[int] = set()
        self._handles = itertools.count()

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        with self._ready:
            self._ready.wait_for(self._available, timeout=wait_seconds)
            out = []
            while len(out) < max_messages and self._available():
                n = self._back.popleft() if self._back else self._take()
                handle = f"{n}.{next(self._handles)}"
                self._hidden[handle] = (n, time.monotonic() + self.visibility_timeout)
                body = json.dumps({"n": n, "text": f"{self.cfg.prefix}{n}"})
                out.append(Received(f"{self.name}-{n}", handle, body))
            return out

    def ack(self, handles: Sequence[str]) -> AckResult:
        result = AckResult()
        with self._ready:
            for handle in handles:
                if handle in self._hidden:
                    self._acked.add(self._hidden.pop(handle)[0])
                    result.deleted.append(handle)
                else:
                    result.failed[handle] = "unknown or expired receipt handle"
        return result

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        with self._ready:
            kept = [h for h in handles if h in self._hidden]
            for handle in kept:
                self._hidden[handle] = (self._hidden[handle][0], time.monotonic() + seconds)
            return {h: h for h in kept}

    def release(self, handles: Sequence[str]) -> None:
        with self._ready:
            self._back.extend(self._hidden.pop(h)[0] for h in handles if h in self._hidden)
            self._ready.notify_all()

    def close(self) -> None:
        pass

    def exhausted(self) -> bool:
        with self._ready:
            return len(self._acked) == self.cfg.messages

    def lag(self) -> int:
        with self._ready:
            return self.cfg.messages - self._next + len(self._back)

    def _take(self) -> int:
        self._next += 1
        return self._next - 1

    def _available(self) -> bool:
        """An event is there to receive (those whose visibility ran out come back first)."""
        now = time.monotonic()
        for handle, (n, until) in list(self._hidden.items()):
            if until <= now:
                del self._hidden[handle]
                self._back.append(n)
        return bool(self._back) or self._next < self.cfg.messages
