"""Claim-check in Spark: payload-pointer bodies are replaced by their objects' content, in the executors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa

from ingest.connector.claim_check import INVALID_REF
from ingest.connector.payload_store import PayloadStore, PayloadUnavailable, split_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PAYLOAD_ERROR = "_payload_error"
"""Why a pointer's payload could not be had (null otherwise); the decoder's ``_error`` takes it first."""
_PIECE_BYTES = 1 << 30
"""At most this many payload bytes in one Arrow batch handed back to Spark (strings: < 2 GiB)."""


def resolve_payloads(df: DataFrame, stores: Mapping[str, PayloadStore]) -> DataFrame:
    """``df`` (staged envelopes) with every pointer's ``body`` replaced by its object, and ``_payload_error``.

    Runs in the executors (``mapInArrow``): only rows with a ``payload_ref`` are fetched, up to
    ``claim_check.fetch_threads`` at once per task. A payload that is not UTF-8 is passed
    base64-encoded with ``body_base64``, as sources pass such bodies. A missing, denied or
    oversized object leaves the pointer as the body and sets ``_payload_error`` (naming bucket
    and key): the message is bad and follows ``on_bad_message``. Transient errors that outlast
    the retries fail the task, hence the batch, which is replayed: nothing is lost.
    """
    from pyspark.sql.types import StringType, StructType

    out = StructType([*df.schema.fields]).add(PAYLOAD_ERROR, StringType())
    stores = dict(stores)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from _resolve(batch, stores)

    return df.mapInArrow(run, out)


def _fetch(store: PayloadStore | None, source: str, ref: str) -> tuple[str, bool, str | None]:
    """(body, body_base64, error) for one pointer."""
    if ref == INVALID_REF:
        return "", False, "marked as a claim-check pointer (ExtendedPayloadSize) but the body is not one"
    bucket, key = split_ref(ref)
    if store is None:
        return "", False, f"pointer to bucket {bucket!r} key {key!r}, but source {source} has no claim_check"
    try:
        data = store.get(bucket, key)
    except PayloadUnavailable as err:
        return "", False, f"claim-check payload unavailable: {err}"  # redacted where raised
    try:
        return data.decode("utf-8"), False, None
    except UnicodeDecodeError:
        import base64

        return base64.b64encode(data).decode("ascii"), True, None


def _resolve(batch: pa.RecordBatch, stores: Mapping[str, PayloadStore]) -> Iterator[pa.RecordBatch]:
    refs = batch.column("payload_ref").to_pylist()
    pointers = [i for i, r in enumerate(refs) if r is not None]
    if not pointers:
        yield _with(batch, None, None, pa.nulls(batch.num_rows, pa.string()))
        return
    sources = batch.column("source").to_pylist()
    threads = max((s.cfg.fetch_threads for s in stores.values()), default=1)
    largest = max((s.cfg.max_payload_bytes for s in stores.values()), default=_PIECE_BYTES)
    per_piece = max(1, min(threads, _PIECE_BYTES // largest))
    start = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="claim-check") as pool:
        for first in range(0, len(pointers), per_piece):
            group = pointers[first : first + per_piece]
            end = batch.num_rows if first + per_piece >= len(pointers) else group[-1] + 1
            piece = batch.slice(start, end - start)
            got = pool.map(lambda i: _fetch(stores.get(sources[i]), sources[i], refs[i]), group)
            bodies = piece.column("body").to_pylist()
            b64 = piece.column("body_base64").to_pylist()
            errors: list[str | None] = [None] * piece.num_rows
            for i, (body, is_b64, error) in zip(group, got, strict=True):
                if error is None:
                    bodies[i - start], b64[i - start] = body, is_b64
                errors[i - start] = error
            yield _with(piece, bodies, b64, errors)
            start = end


def _with(
    batch: pa.RecordBatch, bodies: list | None, b64: list | None, errors: list[str | None] | pa.Array
) -> pa.RecordBatch:
    columns = list(batch.columns)
    names = batch.schema.names
    if bodies is not None:
        columns[names.index("body")] = pa.array(bodies, pa.string())
        columns[names.index("body_base64")] = pa.array(b64, pa.bool_())
    return pa.RecordBatch.from_arrays([*columns, pa.array(errors, pa.string())], [*names, PAYLOAD_ERROR])
