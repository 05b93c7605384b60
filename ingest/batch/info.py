"""What one micro-batch reports when it ends: the batch handler fills it, the job and its summary read it."""

from __future__ import annotations

from dataclasses import dataclass, field


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
