"""A micro-batch's books: the messages it holds (read without Spark where it can), their ack-journal
entries, and its state commit."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkpoints.source_log import batch_files
from ingest.batch.dedup import KEY, dedup_key
from ingest.config import JobConfig
from ingest.connector.envelope import FIELDS, FILE_COLUMN
from ingest.errors import call_with_retries
from ingest.intake.owners import owner_of
from ingest.intake.staged_meta import StagedMeta

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from checkpoints.state import Keys, StateTable

META_COLUMNS = ["source", "receipt_handle", "enqueue_ts", "sent_ts", "received_at", "arrival", "payload_ref"]
"""The envelope columns the batch's books need for each message, beside its dedup key."""
OWNER = "_owner"
"""In a workers job, the meta column naming the intake worker that staged each row (``""``: a driver)."""
_SCALAR_FIELDS = {name for name, kind in FIELDS if not kind.startswith("map")}


def key_column(cfg: JobConfig) -> str | None:
    """The dedup key's envelope column; None if the key is an expression over them."""
    key = cfg.state.dedup_key.strip("`")
    return key if key in _SCALAR_FIELDS else None


def staged_columns(cfg: JobConfig) -> list[str] | None:
    """The envelope columns a batch needs before Spark runs; None if the dedup key is an expression,
    not an envelope column (the batch then selects them with Spark)."""
    key = key_column(cfg)
    return None if key is None else list(dict.fromkeys([*META_COLUMNS, "message_id", key]))


def read_meta(
    cfg: JobConfig, df: DataFrame, batch_id: int, staged: StagedMeta | None, key_col: str | None
) -> tuple[pa.Table, list[str]]:
    """One row per staged message of the batch (source, receipt handle, dedup key, timestamps; in a
    workers job the id of the worker holding it, ``OWNER``), and the batch's staged files if they
    were read without Spark.

    Read with pyarrow, from memory or the batch's staged files, when the dedup key is an
    envelope column (``key_col``) and Spark's file-source log names the files (no Spark job);
    else, or where a file cannot be read (gone, or its S3 store down), selected from the batch
    by Spark (with S3A's retries).
    """
    owned = cfg.intake.mode == "workers"
    files = batch_files(cfg.checkpoint, batch_id) if staged is not None else None
    if staged is not None and key_col and files is not None:
        try:
            tables = [staged.read([f]) for f in files] if owned else [staged.read(files)]
        except OSError:
            pass
        else:
            table = pa.concat_tables(tables) if tables else staged.read([])
            key = table[key_col]
            if key_col != "message_id":
                key = pc.coalesce(key, table["message_id"])
            meta = table.select(list(META_COLUMNS)).append_column(KEY, key)
            if owned:
                counts = np.array([t.num_rows for t in tables], dtype=np.int32)
                owners = pa.DictionaryArray.from_arrays(
                    np.repeat(np.arange(len(files), dtype=np.int32), counts),
                    pa.array([owner_of(f) or "" for f in files], pa.string()),
                )
                meta = meta.append_column(OWNER, owners.cast(pa.string()))
            return meta, files
    key = dedup_key(cfg.state.dedup_key)
    if not owned:
        return df.select(*META_COLUMNS, key).toArrow(), []
    meta = df.select(*META_COLUMNS, key, FILE_COLUMN).toArrow()
    paths = meta[FILE_COLUMN].to_pylist()
    owners = pa.array([owner_of(p) or "" for p in paths], pa.string())
    return meta.drop_columns([FILE_COLUMN]).append_column(OWNER, owners), []


def journal_entries(meta: pa.Table) -> list[tuple[str, ...]] | dict[str, list[tuple[str, ...]]]:
    """(source, handle) per row; (source, handle, payload ref) for claim-check pointers, so the
    acker deletes their objects after their messages, also when it acks a journal after a crash.
    In a workers job (an ``OWNER`` column), ``{worker id: entries}``: the job hands each worker its own."""
    sources, handles = meta["source"].to_pylist(), meta["receipt_handle"].to_pylist()
    if meta["payload_ref"].null_count == meta.num_rows:
        entries: list[tuple[str, ...]] = list(zip(sources, handles, strict=True))
    else:
        refs = meta["payload_ref"].to_pylist()
        entries = [(s, h) if r is None else (s, h, r) for s, h, r in zip(sources, handles, refs, strict=True)]
    if OWNER not in meta.column_names:
        return entries
    owned: dict[str, list[tuple[str, ...]]] = {}
    for owner, entry in zip(meta[OWNER].to_pylist(), entries, strict=True):
        owned.setdefault(owner, []).append(entry)
    return owned


def commit_state(state: StateTable, cfg: JobConfig, batch_id: int, keys: Keys) -> None:
    """Commit the batch's new ``keys`` to the state table, retrying a transient failure (its S3
    store down) for ``state.retry_for`` seconds."""
    deadline = time.monotonic() + cfg.state.retry_for
    call_with_retries(
        lambda: state.commit(batch_id, keys),
        what=f"committing batch {batch_id} to the state table",
        attempts=None,
        initial_wait=0.5,
        max_wait=10.0,
        give_up=lambda: time.monotonic() > deadline,
    )
