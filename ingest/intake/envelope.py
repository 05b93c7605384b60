"""The staged envelope: one JSON object per received message, and its fixed Spark schema.

Its columns are defined once, in ``ingest.connector.envelope``; here they are written and read.
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import itertools
import os
import time
from typing import Any

import orjson

from ingest.connector import FIELDS, Received
from ingest.storage import is_object_url, store_for

DDL = ", ".join(f"`{name}` {kind}" for name, kind in FIELDS)

_arrival = itertools.count()


def encode(source: str, queue: str, receiver: str, messages: list[Received]) -> list[bytes]:
    """Serialize received messages to envelope lines (no trailing newline).

    ``arrival`` increases within the process in receive order, so rows of one FIFO
    group can be sorted back into queue order after Spark shuffles them.

    Example:
        >>> m = Received(message_id="m1", receipt_handle="h1", body="hi")
        >>> line = orjson.loads(encode("src", "q", "src#0", [m])[0])
        >>> line["source"], line["message_id"], line["body"], line["receive_count"]
        ('src', 'm1', 'hi', 1)
    """
    # orjson writes the Received dataclass itself (its fields are envelope columns of the same
    # names); only the receiver's own columns are put in front. A dict per message cost ~3x as
    # much, and this runs for every message in the receiver threads, under the GIL.
    head = orjson.dumps({"source": source, "queue": queue, "receiver": receiver})[:-1]
    head += b',"received_at":%d,"arrival":' % int(time.time() * 1000)
    try:
        return [b"%s%d,%s" % (head, next(_arrival), orjson.dumps(m)[1:]) for m in messages]
    except orjson.JSONEncodeError:  # rare: a body with a lone surrogate (never UTF-8); the slow path
        return [b"%s%d,%s" % (head, next(_arrival), orjson.dumps(_as_utf8(m))[1:]) for m in messages]


def _as_utf8(m: Received) -> Received:
    """``m``, or if its text body cannot be UTF-8 (a lone surrogate from a JSON ``\\ud800``
    escape) its code units as bytes, base64 with the flag set: decoding then finds them not UTF-8
    and the message is a bad one, kept as it came rather than altered."""
    if m.body_base64 or not isinstance(m.body, str):
        return m
    try:
        m.body.encode("utf-8")
    except UnicodeEncodeError:
        raw = m.body.encode("utf-8", "surrogatepass")
        return dataclasses.replace(m, body=base64.b64encode(raw).decode("ascii"), body_base64=True)
    return m


_ARROW_TYPES = {"string": "string", "bigint": "int64", "int": "int32", "boolean": "bool"}


def read_columns(paths: list[str], columns: list[str]):
    """Read ``columns`` of staged files with pyarrow (no Spark), in file and line order.

    Args:
        paths: staged JSON-lines files (local paths or ``s3a://`` URLs).
        columns: envelope columns of scalar type.

    Returns:
        A ``pyarrow.Table`` with those columns.
    """
    import pyarrow as pa

    tables = [parse_columns(*_opened(path), columns) for path in paths]
    return pa.concat_tables(tables) if tables else _arrow_schema(columns).empty_table()


def _opened(path: str) -> tuple[Any, int]:
    """A staged file as ``parse_columns`` takes it: a local path and its size, or an S3 object's
    bytes (its ``s3a://`` URL read whole)."""
    if not is_object_url(path):
        return path, os.path.getsize(path)
    import pyarrow as pa

    folder, name = path.rsplit("/", 1)
    data = store_for(folder).read(name)
    if data is None:
        raise FileNotFoundError(errno.ENOENT, "staged file not found", path)
    return pa.BufferReader(data), len(data)


def parse_columns(source, size: int, columns: list[str]):
    """``columns`` of one staged file's lines, from its path or a pyarrow buffer of ``size`` bytes."""
    import pyarrow.json as pj

    options = pj.ParseOptions(explicit_schema=_arrow_schema(columns), unexpected_field_behavior="ignore")
    # One block per file: a line (a message up to the queue's size limit) never straddles blocks.
    read = pj.ReadOptions(block_size=max(1 << 20, size + 1))
    return pj.read_json(source, read_options=read, parse_options=options).select(columns)


def _arrow_schema(columns: list[str]):
    import pyarrow as pa

    kinds = dict(FIELDS)
    return pa.schema([(c, _ARROW_TYPES[kinds[c]]) for c in columns])


def spark_schema():
    """The envelope as a Spark StructType (imported lazily: receivers don't need Spark)."""
    from pyspark.sql.types import StructType

    return StructType.fromDDL(DDL)
