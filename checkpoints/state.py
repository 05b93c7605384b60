"""The state table: a Delta table of seen message keys, committed once per batch with an app transaction."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from checkpoints.key_index import KeyIndex, fingerprints
from checkpoints.state_delta import (
    COMPACT_TARGET_BYTES,
    SCHEMA,
    TABLE_CONFIG,
    check_schema,
    load_index,
    location,
    store_errors,
)
from checkpoints.state_owner import claim, owner_config
from ingest.storage import is_object_url

log = logging.getLogger(__name__)

Keys: TypeAlias = "pa.Array | pa.ChunkedArray | list[str]"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _as_list(keys: Keys) -> list[Any]:
    return keys.to_pylist() if isinstance(keys, (pa.Array, pa.ChunkedArray)) else list(keys)


def _distinct(values: list[Any]) -> np.ndarray:
    """``values`` without repeats, first occurrences in order, as an object array."""
    unique = list(dict.fromkeys(values))
    out = np.empty(len(unique), dtype=object)
    out[:] = unique
    return out


class StateTable:
    """Seen keys in a Delta table (delta-rs), with an in-memory index for O(batch) lookups.

    ``commit(batch_id, keys)`` is one atomic Delta commit that adds the keys and carries
    the app transaction ``(app_id, batch_id)``; ``committed_batch()`` is that transaction
    version. A crash leaves the whole commit or none of it: delta-rs writes the data files
    first and publishes them with a single put-if-absent of the JSON commit file, so a
    killed writer leaves at most unreferenced data files, which ``maintain()`` vacuums.

    Facts about deltalake 1.6.6 this class relies on (checked by the unit tests):

    - an append of zero rows with ``commit_properties`` still makes a commit holding only
      the ``txn`` action, so an empty batch advances ``committed_batch()``;
    - a stale or equal transaction version is accepted without error and even moves the
      recorded version backwards, so ``commit`` checks the version before writing;
    - writing through a ``DeltaTable`` handle fails with ``CommitFailedError`` if another
      commit with the same app id landed after the handle's snapshot, which closes the
      window between that check and the write;
    - ``delete``, ``optimize.compact``, ``vacuum``, checkpoints and log cleanup keep the
      ``txn`` state (it is carried into checkpoints).

    The index (a ``KeyIndex``: 128-bit fingerprints, 24 bytes a key) holds each key's
    ``seen_ms``. It holds the keys that were within the
    window when the table was opened or last maintained, plus every key committed since:
    a key older than the window counts as seen until the next ``open()`` or
    ``maintain()``, which prune it without reading the table. A key that had already left
    the index can be committed again while its old row waits for ``maintain()``; the
    table holds it twice until then. The index is rebuilt from the table by ``open()``;
    it is never the source of truth.

    ``path`` is a local directory or an ``s3a://`` URL (``state_delta.location``); there, delta-rs's
    errors become one line naming ``state.path`` (``state_delta.store_errors``).

    One writer per table: two jobs with the same ``app_id`` must not write it at once (the
    pipeline's checkpoint lock ensures it). Given ``checkpoint``, the table belongs to the job
    ``app_id`` on that checkpoint (``checkpoints.state_owner``): ``open()`` records it or refuses
    another job's table; without it, ownership is not looked at (tests, tools). ``maintain()``
    vacuums with zero retention, so nothing else may read the table's files while it runs. The
    constructor does no I/O and an instance pickles as an unopened copy.
    """

    def __init__(self, path: str, app_id: str, window_seconds: float, checkpoint: str | None = None) -> None:
        self.path = str(path)
        self.app_id = app_id
        self.window_ms = int(window_seconds * 1000)
        self.checkpoint = checkpoint
        self._dt: Any = None
        self._index: KeyIndex | None = None
        self._committed = -1
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "app_id": self.app_id,
            "window_ms": self.window_ms,
            "checkpoint": self.checkpoint,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        window = state["window_ms"] / 1000
        StateTable.__init__(self, state["path"], state["app_id"], window, state["checkpoint"])

    def open(self) -> None:
        """Create the table if missing (recording its owner), read the committed batch and index
        the keys within the window.

        Raises:
            FatalError: the path holds a Delta table whose schema is not the state schema.
            ConfigError: the table belongs to another job (given ``checkpoint``).
        """
        from deltalake import DeltaTable

        owner = owner_config(self.app_id, self.checkpoint) if self.checkpoint is not None else {}
        uri, options = location(self.path)
        with self._lock, store_errors(self.path, "open the state table at"):
            if DeltaTable.is_deltatable(uri, storage_options=options):
                dt = DeltaTable(uri, storage_options=options)
            else:
                if not is_object_url(self.path):
                    Path(self.path).mkdir(mode=0o700, parents=True, exist_ok=True)
                config = TABLE_CONFIG | owner
                dt = DeltaTable.create(
                    uri,
                    SCHEMA,
                    mode="ignore",
                    configuration=config,
                    raise_if_key_not_exists=False,
                    storage_options=options,
                )
            check_schema(dt, self.path)
            if self.checkpoint is not None:  # a table made by another job at the same time is refused too
                claim(dt, self.path, self.app_id, self.checkpoint)
            self._dt = dt
            self._committed = self._txn_version()
            self._index = load_index(dt, _now_ms() - self.window_ms)
            log.info(
                "state table %s: committed batch %d, %d keys indexed",
                self.path,
                self._committed,
                len(self._index),
            )

    def committed_batch(self) -> int:
        """The last batch id committed for this app id (its Delta app transaction version), -1 if none."""
        return self._committed

    def is_committed(self, batch_id: int) -> bool:
        """True if ``batch_id`` is at or below the last committed batch: its keys are in the table."""
        return batch_id <= self._committed

    def unseen(self, keys: Keys) -> pa.BooleanArray:
        """Return True where a key is not in the index, in O(len(keys) log n).

        ``pyarrow.compute.is_in`` would rebuild its hash table from the whole value set on
        every call: at 1M indexed keys it is ~10-20x slower (``bench/state_table.py``
        measures both). A null key is reported unseen; ``commit`` refuses it.
        """
        index = self._opened_index()
        return pa.array(~index.contains(keys), type=pa.bool_())

    def commit(self, batch_id: int, keys: Keys, now_ms: int | None = None) -> bool:
        """Add ``keys`` and record ``batch_id`` in one atomic Delta commit.

        Keys already in the index and repeats within ``keys`` are not written again, so a
        key has one row while it is indexed. An empty ``keys`` still makes a commit that records the
        batch id, which keeps the replay guard exact for batches of duplicates only.

        Args:
            batch_id: the Spark micro-batch id; must be newer than ``committed_batch()``.
            keys: the batch's new keys.
            now_ms: the keys' ``seen_ms`` (epoch milliseconds); now if None.

        Returns:
            False, writing nothing, if ``batch_id`` is not newer than the table's committed
            batch (a replay); True once the commit is in.

        Raises:
            ValueError: a key is null.
        """
        from deltalake import CommitProperties, Transaction, write_deltalake

        values = _as_list(keys)
        if None in values:
            raise ValueError(f"state commit of batch {batch_id}: a key is null")
        with self._lock, store_errors(self.path, f"commit batch {batch_id} to the state table at"):
            index = self._opened_index()
            self._dt.update_incremental()
            self._committed = self._txn_version()
            if batch_id <= self._committed:
                log.info("state: batch %d already committed (at %d); not written", batch_id, self._committed)
                if batch_id == self._committed:
                    self._index_batch(index, batch_id)
                return False
            distinct = _distinct(values)
            hi, lo = fingerprints(distinct)
            fresh = ~index.contains_hashed(hi, lo)
            new = distinct[fresh]
            seen_ms = _now_ms() if now_ms is None else now_ms
            table = pa.table(
                {"key": new, "batch_id": [batch_id] * len(new), "seen_ms": [seen_ms] * len(new)},
                schema=SCHEMA,
            )
            txn = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])
            try:
                write_deltalake(self._dt, table, mode="append", commit_properties=txn)
            except Exception:
                # A failure after the commit file landed (e.g. in the post-commit checkpoint)
                # must not leave the index behind the table.
                self._dt = self._reload()
                if self._txn_version() != batch_id:
                    raise
                log.warning(
                    "state: batch %d committed, but delta-rs raised afterwards", batch_id, exc_info=True
                )
            self._committed = batch_id
            index.add_hashed(hi[fresh], lo[fresh], seen_ms)
            return True

    def maintain(self, now_ms: int | None = None) -> dict[str, int]:
        """Forget keys older than the window, compact small files, vacuum, checkpoint the log.

        Each step is its own Delta commit; a crash between them leaves a consistent table.

        Args:
            now_ms: the clock the window is measured against (epoch milliseconds); now if None.

        Returns:
            Counts: ``expired`` rows deleted, ``files_compacted`` and ``files_written`` by
            compaction, ``files_vacuumed`` from disk, ``keys_indexed`` afterwards, and the
            table ``version`` that was checkpointed.
        """
        cutoff = (_now_ms() if now_ms is None else now_ms) - self.window_ms
        with self._lock, store_errors(self.path, "maintain the state table at"):
            self._opened_index()
            dt = self._dt
            dt.update_incremental()
            rows_before = self._count_rows()
            deleted = dt.delete(f"seen_ms < {cutoff}")
            expired = deleted.get("num_deleted_rows")
            if expired is None:  # delta-rs omits it when it cannot tell without a scan
                expired = rows_before - self._count_rows()
            compacted = dt.optimize.compact(target_size=COMPACT_TARGET_BYTES)
            # full: also the files of a commit a crash cut short, which no log entry names. Safe
            # with retention 0 because this table has one writer, and it is the caller.
            vacuumed = dt.vacuum(
                retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
            )
            dt.create_checkpoint()
            dt.cleanup_metadata()
            index = self._opened_index()
            index.prune(cutoff)
            counts = {
                "expired": int(expired),
                "files_compacted": int(compacted.get("numFilesRemoved", 0)),
                "files_written": int(compacted.get("numFilesAdded", 0)),
                "files_vacuumed": len(vacuumed),
                "keys_indexed": len(index),
                "version": int(dt.version()),
            }
            log.info("state table %s maintained: %s", self.path, counts)
            return counts

    def count(self) -> int:
        """Rows in the table (metrics and tests)."""
        return self._reload().to_pyarrow_dataset().count_rows()

    def keys(self) -> list[str]:
        """Every key in the table, one entry per row (tests check that each id is there once)."""
        data = self._reload().to_pyarrow_dataset().to_table(columns=["key"])
        return data.column("key").to_pylist()

    def close(self) -> None:
        """Drop the table handle and the index; ``open()`` may be called again."""
        with self._lock:
            self._dt = None
            self._index = None

    def _index_batch(self, index: KeyIndex, batch_id: int) -> None:
        """Index the keys the table holds for ``batch_id``, the batch it committed last: a retry of
        a commit that landed though its call failed (an S3 reply lost) finds them there, and a
        redelivery of one must be seen. Rare (a read of the table), and harmless when indexed."""
        import pyarrow.dataset as ds

        dataset = self._dt.to_pyarrow_dataset()
        rows = dataset.to_table(columns=["key", "seen_ms"], filter=ds.field("batch_id") == batch_id)
        if rows.num_rows:
            keys = rows.column("key").combine_chunks()
            hi, lo = fingerprints(keys)
            fresh = ~index.contains_hashed(hi, lo)
            seen = rows.column("seen_ms").to_numpy()
            index.add_hashed(hi[fresh], lo[fresh], seen[fresh])

    def _opened_index(self) -> KeyIndex:
        if self._index is None:
            raise RuntimeError(f"state table {self.path} is not open; call open() first")
        return self._index

    def _reload(self) -> Any:
        from deltalake import DeltaTable

        uri, options = location(self.path)
        with store_errors(self.path, "read the state table at"):
            return DeltaTable(uri, storage_options=options)

    def _txn_version(self) -> int:
        version = self._dt.transaction_version(self.app_id)
        return -1 if version is None else int(version)

    def _count_rows(self) -> int:
        return self._dt.to_pyarrow_dataset().count_rows()
