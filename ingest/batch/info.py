"""What one micro-batch reports when it ends: the batch handler fills it, the job and its summary read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class SinkWrite(NamedTuple):
    """A sink's write under way, as the batch handler records it for ``/healthz`` and a stop."""

    sink: str
    batch_id: int
    since: float
    """``time.monotonic()`` at its start."""
    grace: float | None
    """The sink's ``stop_grace``: seconds a stop waits for it before cancelling it; None: no end."""


class Cut(NamedTuple):
    """A micro-batch a stop cancelled: it failed uncommitted on purpose, nothing of it is acked."""

    batch_id: int
    why: str
    """What the batch was doing, said after "cancelled while": ``sink S re-sent what its target
    refused``, ``retrying sink S: … after N tries: …``."""


@dataclass
class BatchInfo:
    """One finished micro-batch, as ``BatchHandler`` hands it to the job's ``on_done``.

    A replayed batch (its state was already committed before a crash) has only ``rows``,
    ``replayed`` and ``latency``; the other figures keep their zero defaults.

    >>> info = BatchInfo(rows=3, new=2, dropped=1, written={"out": 2})
    >>> info.replayed, info.written["out"], info.bad
    (False, 2, 0)
    """

    rows: int
    """Staged messages in the batch (duplicates and bad ones too)."""
    replayed: bool = False
    """The state table already held the batch: nothing was written again, its messages are acked."""
    new: int = 0
    """Keys the batch committed to the state table."""
    dropped: int = 0
    """Messages dropped as duplicates or as enqueued before their source's ``startTimeMs``."""
    bad: int = 0
    """Messages that could not be decoded (skipped or dead-lettered by their source's policy)."""
    written: dict[str, int] = field(default_factory=dict)
    """Rows each sink accepted, by sink name (the dead-letter sink is not among them)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each phase of the batch (``read meta``, ``dedup``, ...)."""
    latency: float = 0.0
    """Wall time of the batch, in seconds."""
