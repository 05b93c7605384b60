"""The ack journal: which messages each micro-batch read, kept until that batch's acks are done."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import orjson


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class AckJournal:
    """One file per batch under ``<dir>/acks``: the (source, receipt handle) of every row.

    Written at the start of ``foreachBatch`` (a replayed batch rewrites the same entries),
    read once ``<checkpoint>/commits/N`` exists, removed when the deletes are done. On
    start, journals of committed batches are acked first, so no committed batch stays
    unacked after a crash.
    """

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory) / "acks"

    def write(self, batch_id: int, entries: Sequence[tuple[str, str]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.dir / f"{batch_id}.json", orjson.dumps(list(entries)))

    def read(self, batch_id: int) -> list[tuple[str, str]]:
        return [tuple(e) for e in orjson.loads((self.dir / f"{batch_id}.json").read_bytes())]

    def pending(self) -> list[int]:
        """Batch ids with a journal not yet acked, oldest first."""
        if not self.dir.exists():
            return []
        return sorted(int(p.stem) for p in self.dir.glob("*.json") if p.stem.isdigit())

    def done(self, batch_id: int) -> None:
        (self.dir / f"{batch_id}.json").unlink(missing_ok=True)


def committed_batches(checkpoint: str) -> set[int]:
    """Batch ids Spark has committed: the files named ``N`` in ``<checkpoint>/commits``."""
    commits = Path(checkpoint) / "commits"
    if not commits.exists():
        return set()
    return {int(p.name) for p in commits.iterdir() if p.name.isdigit()}


def is_committed(checkpoint: str, batch_id: int) -> bool:
    return (Path(checkpoint) / "commits" / str(batch_id)).exists()
