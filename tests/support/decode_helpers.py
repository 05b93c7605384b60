"""Helpers for the decoding tests: envelope frames of bodies, options, rows, and binary record sets."""

from __future__ import annotations

import base64
import datetime as dt
import io

import pyarrow as pa

from ingest.config.source_base import DecodeOptions
from ingest.connector.envelope import FIELDS
from ingest.intake.envelope import spark_schema

UTC = dt.timezone.utc


def envelopes(spark, bodies, b64=False):
    """A DataFrame of envelope rows, one per body, with message ids ``m0``, ``m1``, ...

    Args:
        spark: the session.
        bodies: message bodies (text, bytes, or None for a missing body).
        b64: store the bodies base64-encoded and flag them so (bytes as they are, text as UTF-8).

    Returns:
        The envelope DataFrame, in the staged files' schema.
    """
    rows = []
    for i, b in enumerate(bodies):
        row = dict.fromkeys((n for n, _ in FIELDS), None)
        raw = b if isinstance(b, bytes) or b is None else b.encode()
        text = base64.b64encode(raw).decode() if b64 and raw is not None else b
        row |= {"source": "s", "queue": "q", "message_id": f"m{i}", "receipt_handle": f"h{i}"}
        row |= {
            "body": text,
            "body_base64": b64,
            "receive_count": 1,
            "attributes": {},
            "message_attributes": {},
        }
        rows.append(row)
    return spark.createDataFrame(rows, spark_schema())


def opts(**kw):
    """Decode options validated from keyword arguments (dotted keys through ``**{...}``)."""
    return DecodeOptions.model_validate(kw)


def collect(df):
    """The rows of ``df`` as dicts, ordered by their message id."""
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["_meta"]["message_id"])


def records(start: int, n: int) -> list[dict]:
    """``n`` records ``id, name, amount, ts`` from id ``start``, in the tests' binary SCHEMA."""
    base = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return [
        {"id": i, "name": f"n{i}", "amount": i / 4, "ts": base + dt.timedelta(seconds=i)}
        for i in range(start, start + n)
    ]


def encode(fmt: str, rows: list[dict]) -> bytes:
    """One record set of ``rows`` in ``fmt`` (``avro``, ``parquet`` or ``orc``), as bytes."""
    buf = io.BytesIO()
    if fmt == "avro":
        import fastavro

        schema = {
            "type": "record",
            "name": "Event",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": "string"},
                {"name": "amount", "type": "double"},
                {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            ],
        }
        fastavro.writer(buf, fastavro.parse_schema(schema), rows)
    else:
        table = pa.Table.from_pylist(rows)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, buf)
        else:
            from pyarrow import orc

            orc.write_table(table, buf)
    return buf.getvalue()
