"""The Avro schema Flink's ``avro`` format derives from a table schema, for bare Avro records.

A message in Flink's ``avro`` format is one record with no schema of its own: writer and reader
agree on the schema derived from the table's columns. Derived as Flink's ``AvroSchemaConverter``
does: a record named ``record``, every nullable column a ``["null", type]`` union with default
null, ``TIMESTAMP`` as ``timestamp-millis`` (Flink's ``TIMESTAMP(3)``), ``DECIMAL`` as bytes
with the decimal logical type, nested rows as records named after their path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def _avro_type(t: pa.DataType, name: str) -> Any:
    import pyarrow as pa

    simple = [
        (pa.types.is_string, "string"),
        (pa.types.is_large_string, "string"),
        (pa.types.is_boolean, "boolean"),
        (pa.types.is_int8, "int"),
        (pa.types.is_int16, "int"),
        (pa.types.is_int32, "int"),
        (pa.types.is_int64, "long"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (pa.types.is_binary, "bytes"),
        (pa.types.is_large_binary, "bytes"),
    ]
    for test, avro in simple:
        if test(t):
            return avro
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-millis"}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _nullable(t.value_type, f"{name}_item")}
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            raise ValueError(f"column {name}: Avro maps have string keys, not {t.key_type}")
        return {"type": "map", "values": _nullable(t.item_type, f"{name}_value")}
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return _record(f"record_{name}", fields)
    raise ValueError(f"column {name}: no Avro type for {t}")


def _nullable(t: pa.DataType, name: str) -> Any:
    return ["null", _avro_type(t, name)]


def _record(name: str, fields: list[pa.Field]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "fields": [_field(f, f"{name}_{f.name}") for f in fields],
    }


def _field(f: pa.Field, path: str) -> dict[str, Any]:
    if f.nullable:
        return {"name": f.name, "type": _nullable(f.type, path), "default": None}
    return {"name": f.name, "type": _avro_type(f.type, path)}


def avro_schema(schema: pa.Schema) -> dict[str, Any]:
    """The Avro record schema of a table schema (see the module docstring).

    >>> import pyarrow as pa
    >>> fields = [pa.field("id", pa.int64(), nullable=False), ("name", pa.string())]
    >>> avro_schema(pa.schema(fields))["fields"]
    [{'name': 'id', 'type': 'long'}, {'name': 'name', 'type': ['null', 'string'], 'default': None}]
    """
    return _record("record", list(schema))
