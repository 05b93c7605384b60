"""Flink SQL column types as Spark DDL types; the ones Spark has no counterpart for are refused."""

from __future__ import annotations

from sqlglot import exp

T = exp.DataType.Type

_SIMPLE = {
    T.CHAR: "STRING",
    T.VARCHAR: "STRING",
    T.TEXT: "STRING",
    T.BOOLEAN: "BOOLEAN",
    T.TINYINT: "TINYINT",
    T.SMALLINT: "SMALLINT",
    T.INT: "INT",
    T.BIGINT: "BIGINT",
    T.FLOAT: "FLOAT",
    T.DOUBLE: "DOUBLE",
    T.DATE: "DATE",
    T.BINARY: "BINARY",
    T.VARBINARY: "BINARY",
    # Flink's TIMESTAMP(p) has no zone, TIMESTAMP_LTZ(p) is an instant; both keep up to
    # nanoseconds. Spark's TIMESTAMP is an instant with microseconds, which decodes both
    # (an ISO-8601 text without an offset is read in the session's time zone, UTC here).
    T.TIMESTAMP: "TIMESTAMP",
    T.TIMESTAMPTZ: "TIMESTAMP",
    T.TIMESTAMPLTZ: "TIMESTAMP",
}


class UnsupportedType(ValueError):
    """A Flink type with no Spark counterpart here; the message names it."""


def _name(identifier: str) -> str:
    return f"`{identifier.replace('`', '``')}`"


def spark_type(kind: exp.DataType) -> str:
    """The Spark DDL type of a Flink column type, e.g. ``ROW<a INT>`` → ``STRUCT<`a`: INT>``.

    Raises:
        UnsupportedType: for TIME, INTERVAL, MULTISET, RAW and the like.
    """
    t = kind.this
    if t in _SIMPLE:
        return _SIMPLE[t]
    if t == T.DECIMAL:
        params = [p.name for p in kind.expressions]
        if len(params) > 2 or any(not p.isdigit() for p in params):
            raise UnsupportedType(f"DECIMAL({', '.join(params)})")
        precision = params[0] if params else "10"
        scale = params[1] if len(params) > 1 else "0"
        if not 1 <= int(precision) <= 38 or int(scale) > int(precision):
            limits = "Spark allows precision 1-38, scale ≤ precision"
            raise UnsupportedType(f"DECIMAL({precision}, {scale}): {limits}")
        return f"DECIMAL({precision}, {scale})"
    if t == T.ARRAY and len(kind.expressions) == 1:
        return f"ARRAY<{spark_type(kind.expressions[0])}>"
    if t == T.MAP and len(kind.expressions) == 2:
        return f"MAP<{spark_type(kind.expressions[0])}, {spark_type(kind.expressions[1])}>"
    if t == T.STRUCT and kind.expressions:
        fields = []
        for f in kind.expressions:
            if not isinstance(f, exp.ColumnDef) or f.args.get("kind") is None:
                raise UnsupportedType(f"{kind.sql()}: every ROW field needs a name and a type")
            fields.append(f"{_name(f.name)}: {spark_type(f.args['kind'])}")
        return f"STRUCT<{', '.join(fields)}>"
    raise UnsupportedType(kind.sql() or str(t))


def spark_schema(columns: list[tuple[str, str]]) -> str:
    """A Spark DDL column list from (name, Spark type) pairs."""
    return ", ".join(f"{_name(name)} {kind}" for name, kind in columns)
