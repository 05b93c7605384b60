"""The state table: a Delta table of seen message keys, committed once per batch with an app transaction."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

log = logging.getLogger(__name__)

SCHEMA = pa.schema([("key", pa.string(), False), ("batch_id", pa.int64()), ("seen_ms", pa.int64())])


def _now_ms() -> int:
    return int(time.time() * 1000)


class StateTable:
    """Seen keys in a Delta table (delta-rs), with an in-memory index for O(batch) lookups.

    Each ``commit(batch_id, keys)`` is one atomic Delta commit carrying the app transaction
    ``(app_id, batch_id)``, so ``committed_batch()`` tells after a crash whether a batch's
    keys are in: a crash leaves the whole commit or none of it. delta-rs accepts a stale
    transaction version without error, so ``commit`` checks the version first and refuses a
    batch id that is not newer. An empty batch still commits (delta-rs records the
    transaction for an empty append), which keeps the replay guard exact.

    Keys older than ``window_seconds`` are forgotten by ``maintain()``, which also compacts
    the table, vacuums removed files and checkpoints the log; the app transaction survives.
    One job (app id) must write a table at a time; the pipeline's checkpoint lock ensures it.
    """

    def __init__(self, path: str, app_id: str, window_seconds: float) -> None:
        self.path = str(path)
        self.app_id = app_id
        self.window_ms = int(window_seconds * 1000)
        self._index: set[str] = set()
        self._committed = -1

    def _table(self):
        from deltalake import DeltaTable

        return DeltaTable(self.path)

    def open(self) -> None:
        """Create the table if missing and load the keys within the window into memory."""
        from deltalake import DeltaTable, write_deltalake

        if not DeltaTable.is_deltatable(self.path):
            Path(self.path).mkdir(parents=True, exist_ok=True)
            write_deltalake(self.path, SCHEMA.empty_table(), mode="append")
        dt = self._table()
        version = dt.transaction_version(self.app_id)
        self._committed = -1 if version is None else int(version)
        cutoff = _now_ms() - self.window_ms
        keys = dt.to_pyarrow_dataset().to_table(columns=["key"], filter=ds.field("seen_ms") >= cutoff)
        self._index = set(keys.column("key").to_pylist())

    def committed_batch(self) -> int:
        """The last batch id committed for this app id, -1 if none."""
        return self._committed

    def is_committed(self, batch_id: int) -> bool:
        return batch_id <= self._committed

    def unseen(self, keys: pa.Array | pa.ChunkedArray | list[str]) -> pa.BooleanArray:
        """True where a key is not in the table (within the window)."""
        values = keys.to_pylist() if hasattr(keys, "to_pylist") else keys
        index = self._index
        return pa.array([k not in index for k in values], type=pa.bool_())

    def commit(self, batch_id: int, keys: pa.Array | list[str], now_ms: int | None = None) -> bool:
        """Append ``keys`` as batch ``batch_id`` in one commit; False if the batch is not newer."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        current = self._table().transaction_version(self.app_id)
        current = -1 if current is None else int(current)
        if batch_id <= current:
            self._committed = current
            log.info("state: batch %d already committed (at %d); not written again", batch_id, current)
            return False
        values = keys.to_pylist() if hasattr(keys, "to_pylist") else list(keys)
        now = _now_ms() if now_ms is None else now_ms
        table = pa.table(
            {"key": values, "batch_id": [batch_id] * len(values), "seen_ms": [now] * len(values)},
            schema=SCHEMA,
        )
        write_deltalake(
            self.path,
            table,
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)]),
        )
        self._committed = batch_id
        self._index.update(values)
        return True

    def maintain(self, now_ms: int | None = None) -> dict[str, int]:
        """Forget keys past the window, compact, vacuum and checkpoint; return counts."""
        cutoff = (_now_ms() if now_ms is None else now_ms) - self.window_ms
        dt = self._table()
        deleted = dt.delete(f"seen_ms < {cutoff}").get("num_deleted_rows", 0)
        dt = self._table()
        compacted = dt.optimize.compact().get("numFilesRemoved", 0)
        dt = self._table()
        vacuumed = len(dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False))
        self._table().create_checkpoint()
        if deleted:
            keys = self._table().to_pyarrow_dataset().to_table(columns=["key"]).column("key")
            self._index = set(keys.to_pylist())
        return {"expired": int(deleted), "compacted": int(compacted), "vacuumed": vacuumed}

    def count(self) -> int:
        return self._table().to_pyarrow_dataset().count_rows()

    def keys(self) -> list[str]:
        """Every key in the table (tests use it to check that each id is there once)."""
        return self._table().to_pyarrow_dataset().to_table(columns=["key"]).column("key").to_pylist()

    def close(self) -> None:
        self._index = set()
