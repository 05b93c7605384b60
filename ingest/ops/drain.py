"""When a job is done: a drain's rule (``trigger.mode: available_now``), and bounded sources finishing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol


class Polling(Protocol):
    """What the rule reads of a receiver."""

    empty_streak: int
    """Receives in a row that came back empty."""
    last_empty_asked: float
    """``clock()`` when the latest empty receive was asked."""
    unsure_until: float
    """``clock()`` until which an empty receive proves nothing: a receive that failed may have
    been served (the queue hid its messages, the reply was lost) and they come back only when
    their visibility timeout ends."""


class Finite(Protocol):
    """What ``finished`` reads of a source (``ingest.connector.Source``)."""

    bounded: bool
    """The source holds a known, finite number of messages."""

    def exhausted(self) -> bool:
        """Every message was received and acked."""
        ...


def finished(sources: Iterable[Finite]) -> bool:
    """Whether every source is bounded and exhausted, so no message can arrive any more.

    One unbounded source (any queue) keeps the job running: it may always receive more.
    The job still waits until nothing is in flight, staged, buffered or unacked.

    Example:
        >>> class Gen:
        ...     bounded, exhausted = True, lambda self: True
        >>> class Queue:
        ...     bounded, exhausted = False, lambda self: False
        >>> finished([Gen(), Gen()]), finished([Gen(), Queue()]), finished([])
        (True, False, False)
    """
    sources = list(sources)
    return bool(sources) and all(s.bounded and s.exhausted() for s in sources)


class DrainRule:
    """The queues count as drained when nothing is in flight and every receiver's last
    ``idle_rounds`` receives, asked after the last message left flight and after every
    receiver's ``unsure_until``, came back empty.

    An empty receive asked while messages were still in flight proves nothing: on a FIFO
    queue the unacked messages hold their group's lock, so the group looks empty until they
    are deleted. Hence the clock: ``settled`` is the first look that finds nothing in flight
    after something was (the acker ends a batch's flight only once its deletes returned).

    Example:
        >>> class R:
        ...     empty_streak, last_empty_asked, unsure_until = 1, 5.0, 0.0
        >>> rule = DrainRule(idle_rounds=1, clock=lambda: 4.0)
        >>> rule.drained(busy=False, receivers=[R()])
        True
        >>> rule.drained(busy=True, receivers=[R()])  # in flight again at t=4
        False
        >>> rule.drained(busy=False, receivers=[R()])  # the first idle look sets settled = 4
        False
        >>> rule.drained(busy=False, receivers=[R()])  # asked at t=5, after it
        True
    """

    def __init__(self, idle_rounds: int, max_batches: int = 0, clock: Callable[[], float] = time.monotonic):
        self.idle_rounds = idle_rounds
        self.max_batches = max_batches
        self.clock = clock
        self.settled = clock()
        self._busy = False

    def drained(self, busy: bool, receivers: Sequence[Polling], batches: int = 0) -> bool:
        """Whether to stop now.

        Args:
            busy: something is in flight: received and not yet acked, staged or buffered.
            receivers: the source receivers.
            batches: micro-batches finished so far; ``max_batches`` of them end a drain too.
        """
        if self.max_batches and batches >= self.max_batches:
            return True
        if busy:
            self._busy = True
            return False
        if self._busy:
            # The first look after the work left flight. A receive asked between the last look
            # that saw it busy and now may have raced the last deletes (a FIFO group still
            # locked): only receives asked from now on prove the queues empty.
            self._busy = False
            self.settled = self.clock()
            return False
        # Messages a failed receive hid are hidden from every receiver of the queue.
        since = max([self.settled, *(r.unsure_until for r in receivers)])
        return all(r.empty_streak >= self.idle_rounds and r.last_empty_asked >= since for r in receivers)


def progress_line(
    received: int, written: Mapping[str, int], deleted: int, remaining: dict[str, int | None]
) -> str:
    """The line a drain prints while it runs: what moved so far and what the queues still hold.

    ``written`` is the rows each sink accepted (a sum would count a message once per sink);
    ``remaining`` is each source's backlog where its queue reports one (None where it does not).

    >>> progress_line(1200, {"out": 1000, "copy": 990}, 900, {"orders": 300, "sqs": None})[:63]
    'drain: received 1,200, written out:1,000 copy:990, deleted 900;'
    >>> progress_line(1200, {"out": 1000}, 900, {"orders": 300, "sqs": None})[55:]
    'left on the queues: orders ~300, sqs unknown'
    """
    left = ", ".join(f"{name} {'unknown' if n is None else f'~{n:,}'}" for name, n in remaining.items())
    sinks = " ".join(f"{name}:{n:,}" for name, n in written.items())
    return f"drain: received {received:,}, written {sinks}, deleted {deleted:,}; left on the queues: {left}"


class DrainProgress:
    """Prints a drain's ``progress_line`` every ``every`` seconds at most (0: never).

    Args:
        every: ``trigger.progress_interval``.
        metrics: the job's ``Metrics`` (``received``, ``written`` by sink, ``deletedMessages``).
        depths: the job's ``QueueDepths``, asked afresh for each line.
        sinks: the data sinks' names, in the config's order.
        echo: prints the line.
    """

    def __init__(
        self, every: float, metrics: Any, depths: Any, sinks: Sequence[str], echo: Callable[[str], None]
    ) -> None:
        self.every, self.metrics, self.depths, self.sinks, self.echo = every, metrics, depths, sinks, echo
        self.at = time.monotonic()
        """time.monotonic() of the last line, or of the query's start."""

    def restart(self) -> None:
        """The query started: the first line comes ``every`` seconds from now."""
        self.at = time.monotonic()

    def tick(self) -> None:
        """Print a line if one is due."""
        now = time.monotonic()
        if not self.every or now < self.at + self.every:
            return
        self.at = now
        remaining = self.depths.get(now=True)
        m = self.metrics
        received, deleted = int(m.total("received")), int(m.total("deletedMessages"))
        by_sink = m.by_label("written", "sink")
        written = {name: int(by_sink.get(name, 0)) for name in self.sinks}
        self.echo(progress_line(received, written, deleted, remaining))
