"""Chooses a micro-batch's new messages: seen keys, repeats in the batch and early messages drop out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import Column

KEY = "_key"
"""The dedup key's column in the batch's meta table."""
_ORDER = ("received_at", "arrival", "receipt_handle")


def dedup_key(expression: str) -> Column:
    """The ``state.dedup_key`` column over the staged envelopes: the expression as a string,
    the message id where it is null."""
    from pyspark.sql import functions as F

    return F.coalesce(F.expr(expression).cast("string"), F.col("message_id")).alias(KEY)


@dataclass
class Selection:
    """What ``select`` chose: the rows to drop, the new keys to commit, and drop counts per source."""

    drops: list[str]
    """The dropped rows' receipt handles."""
    new_keys: pa.Array
    duplicates: dict[str, int] = field(default_factory=dict)
    early: dict[str, int] = field(default_factory=dict)
    drop_rows: list[tuple[str, int | None]] = field(default_factory=list)
    """The dropped rows as staged lines, (receipt handle, arrival): a handle alone may name a kept
    row too (moto hands one delivery, one handle, to two concurrent receivers), and dropping by it
    would drop the kept copy with the repeat while its key is committed and its message acked."""


def select(
    meta: pa.Table, unseen: Callable[[pa.Array], pa.BooleanArray], starts: Mapping[str, int]
) -> Selection:
    """Pick the batch's new messages, deterministically and without a Python loop per row.

    Messages are taken in receive order (receive time, arrival, handle). A message enqueued
    before its source's ``startTimeMs`` is dropped as early; of the others, one whose key
    ``unseen`` reports as already committed, or whose key an earlier message of the batch
    kept, is a duplicate. So of two copies of a key in one batch the first received is kept,
    and an early copy never hides a later one.

    Args:
        meta: one row per staged message: ``source``, ``receipt_handle``, ``received_at``,
            ``arrival``, ``enqueue_ts``, ``sent_ts`` and the key column ``_key``.
        unseen: True where a key is not in the state table.
        starts: ``startTimeMs`` of the sources that have one.

    Example:
        >>> meta = pa.table({"source": ["s"] * 3, "receipt_handle": ["h1", "h2", "h3"],
        ...     "received_at": [1, 1, 2], "arrival": [0, 1, 2], "enqueue_ts": [5, 5, 5],
        ...     "sent_ts": [None] * 3, "_key": ["a", "a", "b"]})
        >>> chosen = select(meta, lambda keys: pc.not_equal(keys, "b"), {})
        >>> chosen.drops, chosen.new_keys.to_pylist(), chosen.duplicates
        (['h2', 'h3'], ['a'], {'s': 2})
    """
    order = pc.sort_indices(meta, sort_keys=[(c, "ascending") for c in _ORDER])
    meta = meta.take(order)
    n = meta.num_rows
    keys = meta[KEY].combine_chunks()
    sources = meta["source"].combine_chunks()
    early = np.zeros(n, dtype=bool)
    if starts:
        ts = pc.coalesce(meta["enqueue_ts"], meta["sent_ts"]).combine_chunks()
        start = pc.fill_null(pc.index_in(sources, pa.array(list(starts))), -1).to_numpy()
        limits = np.array([*starts.values(), -1], dtype=np.int64)[start]  # -1 for sources without one
        early = pc.fill_null(pc.less(ts, pa.array(limits)), False).to_numpy(zero_copy_only=False)
    candidate = ~early & unseen(keys).to_numpy(zero_copy_only=False)
    kept = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(candidate)
    if len(rows):
        firsts = (
            pa.table({"k": keys.take(rows), "i": rows})
            .group_by("k", use_threads=False)
            .aggregate([("i", "min")])["i_min"]
        )
        kept[firsts.to_numpy()] = True
    dropped = ~kept
    handles = meta["receipt_handle"].combine_chunks().filter(dropped).to_pylist()
    return Selection(
        drops=handles,
        new_keys=keys.filter(kept),
        duplicates=_counts(sources, dropped & ~early),
        early=_counts(sources, early),
        drop_rows=list(
            zip(handles, meta["arrival"].combine_chunks().filter(dropped).to_pylist(), strict=True)
        ),
    )


def row_id(handle: str, arrival: int | None) -> str:
    r"""A staged line's identity as one string, as ``row_id_column`` computes it in Spark: the
    receipt handle, and the line's ``arrival`` (unique within the process that staged it).

    >>> row_id("h1", 7), row_id("h1", None)
    ('h1\x007', 'h1')
    """
    return handle if arrival is None else f"{handle}\x00{arrival}"


def row_id_column() -> Column:
    """``row_id`` of each staged envelope, as a Spark column."""
    from pyspark.sql import functions as F

    return F.concat_ws("\x00", F.col("receipt_handle"), F.col("arrival").cast("string"))


def _counts(sources: pa.Array, mask: np.ndarray) -> dict[str, int]:
    if not mask.any():
        return {}
    counted = pc.value_counts(sources.filter(mask))
    return dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True))
