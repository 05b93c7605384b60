"""The ack journal: which messages each micro-batch read, kept until that batch's acks are done."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from ingest.storage import store_for

Entries = Sequence[Sequence[str]]


def own_dir(checkpoint: str) -> str:
    """``<checkpoint>/mq_ingest``, a local path or an ``s3a://`` URL: the job's own files beside
    Spark's (the lock, the owner record, the driver JVM's record, the ack journals)."""
    return checkpoint.rstrip("/") + "/mq_ingest"


class AckJournal:
    """One file per batch under ``<dir>/acks``: the (source, receipt handle) of every row, and
    for a claim-check pointer its payload object (``bucket/key``) as a third item.

    ``<dir>`` is a local directory or an ``s3a://`` prefix (``ingest.storage``): each journal is
    written whole (a local rename, owner-only, as it holds receipt handles; or one PUT). Written
    at the start of ``foreachBatch`` (a replayed batch rewrites the same entries), read once
    ``<checkpoint>/commits/N`` exists, removed when the deletes are done. On start, journals of
    committed batches are acked first, so no committed batch stays unacked after a crash.
    """

    def __init__(self, directory: str, shared: bool = False) -> None:
        self.store = store_for(directory)
        self.shared = shared
        """Written by another process (an intake worker's, by the job): listed at every ``pending``."""
        self._written: dict[int, Entries | Mapping[str, Entries]] = {}
        """What this process wrote, so the acker need not parse its own journals back."""
        self._pending: set[int] | None = None
        """The journals not yet acked: listed once, then kept as this process writes and acks them
        (it holds the checkpoint lock: no other process writes here). The acker asks every 50 ms;
        on S3 each listing would be a LIST request."""

    def write(self, batch_id: int, entries: Entries | Mapping[str, Entries]) -> None:
        """``entries`` is a list, or in a workers job a mapping ``{worker id: entries}``."""
        self.store.write(f"acks/{batch_id}.json", orjson.dumps(entries))
        self._written[batch_id] = entries
        if self._pending is not None:
            self._pending.add(batch_id)

    def read(self, batch_id: int) -> Entries | Mapping[str, Entries]:
        """The batch's ``(source, receipt handle[, payload ref])`` entries, as written."""
        if batch_id in self._written:
            return self._written[batch_id]
        data = self.store.read(f"acks/{batch_id}.json")
        if data is None:
            raise FileNotFoundError(2, "no ack journal", self.store.url(f"acks/{batch_id}.json"))
        return orjson.loads(data)

    def pending(self) -> list[int]:
        """Batch ids with a journal not yet acked, oldest first."""
        if self._pending is None or self.shared:
            stems = (name[: -len(".json")] for name in self.store.list("acks") if name.endswith(".json"))
            self._pending = {int(stem) for stem in stems if stem.isdigit()} | set(self._written)
        return sorted(self._pending)

    def done(self, batch_id: int) -> None:
        self.store.delete([f"acks/{batch_id}.json"])
        self._written.pop(batch_id, None)
        if self._pending is not None:
            self._pending.discard(batch_id)


def committed_batches(checkpoint: str) -> set[int]:
    """Batch ids Spark has committed: the files named ``N`` in ``<checkpoint>/commits``."""
    return _numbered(checkpoint, "commits")


def planned_batches(checkpoint: str) -> set[int]:
    """Batch ids Spark has planned (each one's files chosen): the files ``N`` in ``<checkpoint>/offsets``."""
    return _numbered(checkpoint, "offsets")


def _numbered(checkpoint: str, folder: str) -> set[int]:
    return {int(name) for name in store_for(checkpoint).list(folder) if name.isdigit()}


def is_committed(checkpoint: str, batch_id: int) -> bool:
    """Whether Spark has committed ``batch_id`` (``commits/N`` exists; Spark writes it whole)."""
    return store_for(checkpoint).read(f"commits/{batch_id}") is not None
