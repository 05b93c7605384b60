"""The JDBC sink's columns: what a batch's Spark types become, and whether a table's columns take them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.errors import FatalError, redact

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

_JDBC_KINDS = {
    "bool": (-7, 16),
    "int": (-6, 5, 4, -5),
    "number": (6, 7, 8, 2, 3),
    "text": (1, 12, -1, -15, -9, -16, 2005, 2011, 1111, 2009),
    "date": (91,),
    "timestamp": (93, 2014),
    "binary": (-2, -3, -4, 2004),
}
"""``java.sql.Types`` codes by kind (``OTHER``, 1111, is PostgreSQL's json, jsonb, uuid…: text kinds)."""
_KIND_OF_CODE = {code: kind for kind, codes in _JDBC_KINDS.items() for code in codes}
_TAKES = {"int": {"int", "number"}, "number": {"number"}}
"""A kind another kind's column takes as well (an integer into a numeric column); else the same kind."""


def spark_kind(kind: DataType) -> str:
    """``int``, ``number``, ``text``… for a Spark type as the sink writes it (nested types as JSON text)."""
    from pyspark.sql import types as T

    if isinstance(kind, T.BooleanType):
        return "bool"
    if isinstance(kind, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int"
    if isinstance(kind, (T.FloatType, T.DoubleType, T.DecimalType)):
        return "number"
    if isinstance(kind, T.DateType):
        return "date"
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType)):
        return "timestamp"
    if isinstance(kind, T.BinaryType):
        return "binary"
    return "text"


def matched(
    key: str,
    table: str,
    schema: StructType,
    have: list[tuple[str, int, str]],
    cast_types: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Each batch column as (the table's name for it, its name in the batch), and the table's type of
    the columns that need a cast (text into one of ``cast_types``, by the table's name); ``FatalError``
    naming ``key``, the table and the column for a column the table lacks or whose type cannot take
    the batch's values (a string into an integer column, a fraction into an integer column…)."""
    by_lower = {name.lower(): (name, code, type_name) for name, code, type_name in have}
    names: list[tuple[str, str]] = []
    casts: dict[str, str] = {}
    for f in schema.fields:
        found = by_lower.get(f.name.lower())
        if found is None:
            raise FatalError(
                redact(f"{key}: table {table} has no column {f.name} (it has {[h[0] for h in have]})")
            )
        name, code, type_name = found
        ours, theirs = spark_kind(f.dataType), _KIND_OF_CODE.get(code)
        if theirs is not None and theirs != ours and theirs not in _TAKES.get(ours, ()):
            raise FatalError(
                redact(
                    f"{key}: table {table} column {name} is {type_name}, but the sink writes "
                    f"{f.dataType.simpleString()} values into it"
                )
            )
        if ours == "text" and type_name.lower() in cast_types:
            casts[name] = type_name
        names.append((name, f.name))
    return names, casts
