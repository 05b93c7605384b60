"""The ack journal: which messages each micro-batch read, kept until that batch's acks are done."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import orjson


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    # Owner-only: journals hold receipt handles, dead letters hold message bodies.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class AckJournal:
    """One file per batch under ``<dir>/acks``: the (source, receipt handle) of every row, and
    for a claim-check pointer its payload object (``bucket/key``) as a third item.

    Written at the start of ``foreachBatch`` (a replayed batch rewrites the same entries),
    read once ``<checkpoint>/commits/N`` exists, removed when the deletes are done. On
    start, journals of committed batches are acked first, so no committed batch stays
    unacked after a crash.
    """

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory) / "acks"
        self._written: dict[int, Sequence[Sequence[str]]] = {}
        """What this process wrote, so the acker need not parse its own journals back."""

    def write(self, batch_id: int, entries: Sequence[Sequence[str]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / f"{batch_id}.json", orjson.dumps(entries))
        self._written[batch_id] = entries

    def read(self, batch_id: int) -> Sequence[Sequence[str]]:
        """The batch's ``(source, receipt handle[, payload ref])`` entries."""
        if batch_id in self._written:
            return self._written[batch_id]
        return orjson.loads((self.dir / f"{batch_id}.json").read_bytes())

    def pending(self) -> list[int]:
        """Batch ids with a journal not yet acked, oldest first."""
        if not self.dir.exists():
            return []
        return sorted(int(p.stem) for p in self.dir.glob("*.json") if p.stem.isdigit())

    def done(self, batch_id: int) -> None:
        (self.dir / f"{batch_id}.json").unlink(missing_ok=True)
        self._written.pop(batch_id, None)


def committed_batches(checkpoint: str) -> set[int]:
    """Batch ids Spark has committed: the files named ``N`` in ``<checkpoint>/commits``."""
    return _numbered(Path(checkpoint) / "commits")


def planned_batches(checkpoint: str) -> set[int]:
    """Batch ids Spark has planned (each one's files chosen): the files ``N`` in ``<checkpoint>/offsets``."""
    return _numbered(Path(checkpoint) / "offsets")


def _numbered(folder: Path) -> set[int]:
    if not folder.exists():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def is_committed(checkpoint: str, batch_id: int) -> bool:
    return (Path(checkpoint) / "commits" / str(batch_id)).exists()
