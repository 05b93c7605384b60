"""Decodes binary message bodies that each carry one Avro, Parquet or ORC record set into rows.

One message becomes as many rows as its record set holds, each with the message's ``_meta``;
a body that cannot be read becomes one row of nulls with ``_error`` saying why, so the
bad-message policy sees it. Avro is read with fastavro (object container files), Parquet
and ORC with pyarrow. Decoding runs on the executors through ``mapInArrow``.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

from sinks.base import META

BINARY_FORMATS = ("avro", "parquet", "orc")
ERROR = "_error"
"""Null for a row that decoded; otherwise why it did not."""
_BYTES = "_bytes"


def read_record_set(data: bytes, fmt: str, schema: pa.Schema) -> pa.Table:
    """The rows of one encoded record set, cast to ``schema`` (columns matched by name, case-insensitively).

    Raises:
        ValueError: the bytes are not a record set of ``fmt``, or a column is missing or of
            a type that cannot be cast.
    """
    import pyarrow as pa

    if fmt == "avro":
        import fastavro

        records = list(fastavro.reader(io.BytesIO(data)))
        table = pa.Table.from_pylist(records) if records else schema.empty_table()
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
    elif fmt == "orc":
        from pyarrow import orc

        table = orc.ORCFile(io.BytesIO(data)).read()
    else:
        raise ValueError(f"unknown binary format {fmt!r}")
    by_name = {name.lower(): i for i, name in enumerate(table.column_names)}
    columns = []
    for field in schema:
        i = by_name.get(field.name.lower())
        if i is None:
            raise ValueError(f"{fmt} record set has no column {field.name!r}; has {table.column_names}")
        columns.append(table.column(i).cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _decode_batches(
    batches: Iterator[pa.RecordBatch], fmt: str, body: pa.Schema, out: pa.Schema
) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    for batch in batches:
        parts: list[pa.Table] = []
        index: list[int] = []
        errors: list[str | None] = []
        for i, data in enumerate(batch.column(_BYTES).to_pylist()):
            try:
                if data is None:
                    raise ValueError("empty body")
                table = read_record_set(data, fmt, body)
            except Exception as err:  # any reader error makes this message a bad one
                table = pa.Table.from_arrays([pa.nulls(1, f.type) for f in body], schema=body)
                parts.append(table)
                index.append(i)
                errors.append(f"not a {fmt} record set: {type(err).__name__}: {err}"[:500])
                continue
            parts.append(table)
            index += [i] * table.num_rows
            errors += [None] * table.num_rows
        if not index:
            continue
        rows = pa.concat_tables(parts).combine_chunks()
        take = pa.array(index, pa.int64())
        arrays: list[Any] = [rows.column(f.name) for f in body]
        for name in out.names[len(body) :]:
            arrays.append(pa.array(errors, pa.string()) if name == ERROR else batch.column(name).take(take))
        yield from pa.Table.from_arrays(arrays, schema=out).to_batches()


def decode_binary(df: DataFrame, fmt: str, schema: StructType, meta: Any, carry: list[str]) -> DataFrame:
    """Envelope rows → ``schema``'s columns, ``_meta``, ``_error`` and ``carry``, one row per record."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StringType, StructType

    raw = F.when(F.col("body_base64"), F.unbase64("body")).otherwise(F.encode("body", "UTF-8"))
    src = df.select(raw.alias(_BYTES), meta, *[F.col(c) for c in carry])
    out = StructType([*schema.fields])
    out.add(src.schema[META])
    out.add(ERROR, StringType())
    for c in carry:
        out.add(src.schema[c])
    conf = df.sparkSession.conf
    # Arrow types as Spark expects them back from mapInArrow (session time zone, var-type size).
    kw = {
        "timezone": conf.get("spark.sql.session.timeZone"),
        "prefers_large_types": conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true",
    }
    body_arrow = to_arrow_schema(schema, **kw)
    out_arrow = to_arrow_schema(out, **kw)
    return src.mapInArrow(lambda it: _decode_batches(it, fmt, body_arrow, out_arrow), out)
