"""Decodes binary message bodies that each carry one Avro, Parquet or ORC record set into rows.

One message becomes as many rows as its record set holds, each with the message's ``_meta``;
a body that cannot be read becomes one row of nulls with ``_error`` saying why, so the
bad-message policy sees it. Avro is read with fastavro: an object container file (its own
schema), or else one bare record in the schema derived from the job's (Flink's ``avro``
format, :mod:`ingest.decode.avro_schema`); Parquet and ORC with pyarrow. Decoding runs on the
executors through ``mapInArrow``.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

from ingest.connector import META

BINARY_FORMATS = ("avro", "parquet", "orc")
ERROR = "_error"
"""Null for a row that decoded; otherwise why it did not."""
_BYTES = "_bytes"


def _check_size(rows: int, size: int, max_rows: int, max_bytes: int) -> None:
    if rows > max_rows:
        raise ValueError(f"more than {max_rows} records (the source's max_decoded_rows)")
    if size > max_bytes:
        raise ValueError(f"decodes to more than {max_bytes} bytes (the source's max_decoded_bytes)")


_AVRO_MAGIC = b"Obj\x01"
"""How an Avro object container file starts; anything else is taken as one bare record."""


def read_record_set(
    data: bytes,
    fmt: str,
    schema: pa.Schema,
    max_rows: int = 10**9,
    max_bytes: int = 2**62,
    bare_avro: Any = None,
) -> pa.Table:
    """The rows of one encoded record set, cast to ``schema`` (columns matched by name, case-insensitively).

    A record set over ``max_rows`` records or ``max_bytes`` decoded bytes is refused before
    it is materialized (Avro block by block, Parquet and ORC from their metadata), so a small
    compressed body cannot take the executor's memory.

    ``bare_avro`` is the parsed Avro schema bare records are read with (default: derived
    from ``schema`` on each call).

    Raises:
        ValueError: the bytes are not a record set of ``fmt``, exceed a cap, or a column is
            missing or of a type that cannot be cast.
    """
    import pyarrow as pa

    if fmt == "avro" and not data.startswith(_AVRO_MAGIC):
        return _bare_avro(data, schema, bare_avro)
    if fmt == "avro":
        import fastavro

        records: list[Any] = []
        rows = size = 0
        names: dict[str, str] = {}
        for block in fastavro.block_reader(io.BytesIO(data)):  # one decompressed block at a time
            rows += block.num_records
            size += block.bytes_.getbuffer().nbytes  # type: ignore[attr-defined]  # fastavro's stub lacks it
            _check_size(rows, size, max_rows, max_bytes)
            names = {f["name"].lower(): f["name"] for f in block.writer_schema["fields"]}
            records.extend(block)
        if not records:
            return schema.empty_table()
        missing = [f.name for f in schema if f.name.lower() not in names]
        if missing:
            raise ValueError(f"avro record set has no column {missing[0]!r}; has {sorted(names.values())}")
        # Built with the schema's types from the start: Avro maps and records differ only there.
        keys = [(f.name, names[f.name.lower()]) for f in schema]
        table = pa.Table.from_pylist([{k: r.get(src) for k, src in keys} for r in records], schema=schema)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        file = pq.ParquetFile(io.BytesIO(data))
        md = file.metadata
        _check_size(
            md.num_rows,
            sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups)),
            max_rows,
            max_bytes,
        )
        table = file.read()
    elif fmt == "orc":
        from pyarrow import orc

        file = orc.ORCFile(io.BytesIO(data))
        _check_size(file.nrows, 0, max_rows, max_bytes)
        table = file.read()
    else:
        raise ValueError(f"unknown binary format {fmt!r}")
    _check_size(table.num_rows, table.nbytes, max_rows, max_bytes)
    by_name = {name.lower(): i for i, name in enumerate(table.column_names)}
    columns = []
    for field in schema:
        i = by_name.get(field.name.lower())
        if i is None:
            raise ValueError(f"{fmt} record set has no column {field.name!r}; has {table.column_names}")
        columns.append(table.column(i).cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _bare_avro(data: bytes, schema: pa.Schema, parsed: Any) -> pa.Table:
    import fastavro
    import pyarrow as pa

    from ingest.decode.avro_schema import avro_schema

    parsed = parsed if parsed is not None else fastavro.parse_schema(avro_schema(schema))
    buf = io.BytesIO(data)
    record = fastavro.schemaless_reader(buf, parsed)
    if buf.tell() != len(data):
        left = len(data) - buf.tell()
        raise ValueError(f"{left} bytes left after the record: not one Avro record of the job's schema")
    return pa.Table.from_pylist([record], schema=schema)


def _decode_batches(
    batches: Iterator[pa.RecordBatch], fmt: str, body: pa.Schema, out: pa.Schema, caps: tuple[int, int]
) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    bare_avro = None
    if fmt == "avro":
        import fastavro

        from ingest.decode.avro_schema import avro_schema

        bare_avro = fastavro.parse_schema(avro_schema(body))
    for batch in batches:
        parts: list[pa.Table] = []
        index: list[int] = []
        errors: list[str | None] = []
        for i, data in enumerate(batch.column(_BYTES).to_pylist()):
            try:
                if data is None:
                    raise ValueError("empty body")
                table = read_record_set(data, fmt, body, *caps, bare_avro=bare_avro)
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


def decode_binary(
    df: DataFrame,
    fmt: str,
    schema: StructType,
    meta: Any,
    carry: list[str],
    caps: tuple[int, int] = (10**9, 2**62),
) -> DataFrame:
    """Envelope rows → ``schema``'s columns, ``_meta``, ``_error`` and ``carry``, one row per record.

    ``caps`` are the most records and decoded bytes one message may hold.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StringType, StructField, StructType

    raw = F.when(F.col("body_base64"), F.unbase64("body")).otherwise(F.encode("body", "UTF-8"))
    src = df.select(raw.alias(_BYTES), meta, *[F.col(c) for c in carry])
    # Nullable whatever the schema says: a message that cannot be read is one row of nulls.
    out = StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])
    out.add(src.schema[META])
    out.add(ERROR, StringType())
    for c in carry:
        out.add(src.schema[c])
    conf = df.sparkSession.conf
    # Arrow types as Spark expects them back from mapInArrow (session time zone, var-type size).
    timezone = conf.get("spark.sql.session.timeZone")
    large = conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    body_arrow = to_arrow_schema(schema, timezone=timezone, prefers_large_types=large)
    out_arrow = to_arrow_schema(out, timezone=timezone, prefers_large_types=large)
    return src.mapInArrow(lambda it: _decode_batches(it, fmt, body_arrow, out_arrow, caps), out)
