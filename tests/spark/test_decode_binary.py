"""Binary bodies on Spark: one Avro, Parquet or ORC record set per message becomes one row per record."""

from __future__ import annotations

import base64
import datetime as dt
import io

import pytest

from ingest.decode.rows import ERROR, decode
from tests.support.decode_helpers import UTC, collect, encode, envelopes, opts, records

pytestmark = pytest.mark.spark
SCHEMA = "id BIGINT, name STRING, amount DOUBLE, ts TIMESTAMP"


@pytest.mark.parametrize("fmt", ["avro", "parquet", "orc"])
def test_each_record_of_each_message_becomes_a_row_and_a_bad_body_an_error(spark, fmt):
    bodies = [encode(fmt, records(0, 3)), encode(fmt, records(3, 2)), b"\x00\x01 not a record set \xff"]
    df = envelopes(spark, [base64.b64encode(b).decode() for b in bodies])
    df = df.withColumn("body_base64", df.body.isNotNull())  # the sources flag binary bodies so
    got = collect(decode(df, opts(format=fmt), SCHEMA))
    good = [r for r in got if r[ERROR] is None]
    assert [(r["_meta"]["message_id"], r["id"], r["name"], r["amount"]) for r in good] == [
        ("m0", 0, "n0", 0.0),
        ("m0", 1, "n1", 0.25),
        ("m0", 2, "n2", 0.5),
        ("m1", 3, "n3", 0.75),
        ("m1", 4, "n4", 1.0),
    ]
    assert [r["ts"].replace(tzinfo=UTC) for r in good] == [r["ts"] for r in records(0, 5)]
    (bad,) = [r for r in got if r[ERROR] is not None]
    assert bad["_meta"]["message_id"] == "m2" and bad["id"] is None
    assert bad[ERROR].startswith(f"not a {fmt} record set")


def test_a_record_set_without_a_schema_column_names_it(spark):
    body = encode("parquet", [{"id": 1, "name": "x"}])
    df = envelopes(spark, [base64.b64encode(body).decode()])
    df = df.withColumn("body_base64", df.body.isNotNull())
    (row,) = collect(decode(df, opts(format="parquet"), SCHEMA))
    assert "no column 'amount'" in row[ERROR]


def test_record_sets_over_the_caps_are_bad_messages_before_they_are_materialized(spark):
    import fastavro

    schema = fastavro.parse_schema(
        {"type": "record", "name": "E", "fields": [{"name": "s", "type": "string"}]}
    )
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"s": "x" * (8 << 20)}] * 4, codec="deflate")  # 32 MiB from ~33 KB
    bomb = buf.getvalue()
    assert len(bomb) < 64 * 1024
    df = envelopes(spark, [base64.b64encode(bomb).decode()])
    df = df.withColumn("body_base64", df.body.isNotNull())
    (row,) = collect(decode(df, opts(format="avro"), "s STRING"))
    assert "decodes to more than 16777216 bytes (the source's max_decoded_bytes)" in row[ERROR]
    many = encode("parquet", records(0, 3))
    df = envelopes(spark, [base64.b64encode(many).decode()])
    df = df.withColumn("body_base64", df.body.isNotNull())
    (row,) = collect(decode(df, opts(format="parquet", max_decoded_rows=2), SCHEMA))
    assert "more than 2 records (the source's max_decoded_rows)" in row[ERROR]
    assert len(collect(decode(df, opts(format="parquet", max_decoded_rows=3), SCHEMA))) == 3


def test_bare_avro_records_decode_with_the_schema_derived_from_the_ddl(spark):
    """Flink's ``avro`` format: one record per message, no schema of its own (container files still work)."""
    import decimal

    import fastavro

    from ingest.decode.avro_schema import avro_schema

    ddl = (
        "id BIGINT NOT NULL, name STRING, price DECIMAL(8, 2), day DATE, ts TIMESTAMP, "
        "tags ARRAY<STRING>, attrs MAP<STRING, INT>, pos STRUCT<x: DOUBLE, y: DOUBLE>, raw BINARY"
    )
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    writer = fastavro.parse_schema(avro_schema(to_arrow_schema(StructType.fromDDL(ddl), timezone="UTC")))
    row = {
        "id": 7,
        "name": "seven",
        "price": decimal.Decimal("12.34"),
        "day": dt.date(2026, 3, 4),
        "ts": dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC),
        "tags": ["a", None],
        "attrs": {"k": 1},
        "pos": {"x": 1.5, "y": None},
        "raw": b"\x00\xff",
    }
    bare = io.BytesIO()
    fastavro.schemaless_writer(bare, writer, row)
    nulls = io.BytesIO()
    fastavro.schemaless_writer(nulls, writer, {"id": 8})
    container = io.BytesIO()
    fastavro.writer(container, writer, [row | {"id": 9}, row | {"id": 10}])
    bodies = [bare.getvalue(), nulls.getvalue(), container.getvalue(), bare.getvalue() + b"\x02"]
    df = envelopes(spark, [base64.b64encode(b).decode() for b in bodies])
    df = df.withColumn("body_base64", df.body.isNotNull())
    got = collect(decode(df, opts(format="avro"), ddl))
    good = [r for r in got if r[ERROR] is None]
    assert [r["id"] for r in good] == [7, 8, 9, 10]
    first = good[0]
    assert (first["name"], first["price"], first["day"]) == (
        "seven",
        decimal.Decimal("12.34"),
        dt.date(2026, 3, 4),
    )
    assert first["ts"].replace(tzinfo=UTC) == row["ts"] and first["raw"] == bytearray(b"\x00\xff")
    assert (first["tags"], first["attrs"], first["pos"]) == (["a", None], {"k": 1}, {"x": 1.5, "y": None})
    assert good[1]["name"] is None and good[1]["tags"] is None
    (bad,) = [r for r in got if r[ERROR] is not None]
    assert bad["_meta"]["message_id"] == "m3" and "1 bytes left after the record" in bad[ERROR]
