"""Delta sink, executor side: a task writes its rows as Parquet files and returns their add actions."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sinks.delta.errors import store_error

ADDED = "path string, size bigint, partition_values string, modification_time bigint, stats string"
"""What a task returns: one row per file it wrote (``partition_values`` as a JSON object)."""

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(32)}
_STRING_STATS = 32
"""Strings up to this long get min/max statistics (Delta's default prefix length); longer ones none."""


def is_local(path: str) -> bool:
    """True for a local directory (a plain path or ``file://``), which pyarrow writes directly."""
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return os.path.abspath(path.removeprefix("file://"))


def partition_value(value: Any) -> str | None:
    """A partition value as Delta's log holds it: a string (timestamps ``yyyy-MM-dd HH:mm:ss.ffffff``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "tzinfo") and hasattr(value, "hour"):  # datetime: UTC, without the offset
        return value.replace(tzinfo=None).isoformat(sep=" ")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _escape(value: str) -> str:
    """A directory name part as Hive and Spark escape it (``%3A`` for ``:``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _directory(names: list[str], values: list[str | None]) -> str:
    return "".join(
        f"{_escape(n)}={NULL_PARTITION if v is None else _escape(v)}/"
        for n, v in zip(names, values, strict=True)
    )


@dataclass
class _Open:
    """A file being written: its writer, stream and running statistics."""

    relative: str
    stream: Any
    writer: pq.ParquetWriter
    partition: dict[str, str | None]
    rows: int = 0
    nulls: dict[str, int] = field(default_factory=dict)
    low: dict[str, Any] = field(default_factory=dict)
    high: dict[str, Any] = field(default_factory=dict)

    def add(self, table: pa.Table) -> None:
        self.writer.write_table(table)
        self.rows += table.num_rows
        for name in table.column_names:
            column = table.column(name)
            if pa.types.is_nested(column.type):  # Delta wants per-leaf counts for these: none given
                continue
            self.nulls[name] = self.nulls.get(name, 0) + column.null_count
            if not _has_min_max(column.type) or column.null_count == len(column):
                continue
            low, high = (v.as_py() for v in pc.min_max(column).values())
            if isinstance(low, str) and (len(low) > _STRING_STATS or len(high) > _STRING_STATS):
                self.low[name] = self.high[name] = None  # a prefix would be a wrong maximum
                continue
            if name not in self.low:
                self.low[name], self.high[name] = low, high
            elif self.low[name] is not None:
                self.low[name], self.high[name] = min(self.low[name], low), max(self.high[name], high)

    def stats(self) -> str:
        kept = {n: v for n, v in self.low.items() if v is not None}
        return json.dumps(
            {
                "numRecords": self.rows,
                "minValues": kept,
                "maxValues": {n: self.high[n] for n in kept},
                "nullCount": self.nulls,
            },
            default=str,
        )


def _has_min_max(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)


@dataclass(frozen=True)
class FileWriter:
    """Writes a task's Arrow batches under the table root, one file per partition value, rolled at
    ``target_size``; picklable (Spark ships it to the executors for ``mapInArrow``).

    Files are named ``part-<batch>-<uuid>.parquet``: until the driver commits their add actions no
    reader sees them, and a failed batch's files are vacuumed (a failed task deletes its own).
    """

    root: str
    storage_options: dict[str, str] = field(repr=False)  # credentials: not in a repr
    partition_by: tuple[str, ...]
    target_size: int
    batch_id: int
    key: str = "sinks.delta.path"
    """The config key errors name (``sinks.<name>.path``)."""

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Write; an object-store error raises the sink's ``TransientError`` or ``FatalError``."""
        fs, base = self._filesystem()
        open_files: dict[tuple, _Open] = {}
        done: list[_Open] = []
        try:
            for batch in batches:
                if batch.num_rows:
                    self._write(fs, base, pa.Table.from_batches([batch]), open_files, done)
            for f in open_files.values():
                self._close(f, done)
        except BaseException as err:
            for f in [*open_files.values(), *done]:
                _discard(fs, base, f)
            if isinstance(err, OSError) and not is_local(self.root):
                raise store_error(self.key, f"write a file under {self.root}", err) from None
            raise
        yield self._actions(fs, base, done)

    def _filesystem(self) -> tuple[Any, str]:
        from pyarrow import fs

        if is_local(self.root):
            return fs.LocalFileSystem(), local_path(self.root) + "/"
        from deltalake.fs import DeltaStorageHandler

        return fs.PyFileSystem(DeltaStorageHandler(self.root, dict(self.storage_options))), ""

    def _write(self, fs: Any, base: str, table: pa.Table, open_files: dict, done: list) -> None:
        names = list(self.partition_by)
        if not names:
            self._append(fs, base, (), table.combine_chunks(), open_files, done)
            return
        groups = table.select(names).group_by(names, use_threads=False).aggregate([])
        data = table.drop_columns(names)
        for key in groups.to_pylist():
            mask = None
            for name in names:
                col = table.column(name)
                eq = pc.is_null(col) if key[name] is None else pc.equal(col, pa.scalar(key[name], col.type))
                mask = eq if mask is None else pc.and_(mask, eq)
            values = tuple(partition_value(key[n]) for n in names)
            self._append(fs, base, values, data.filter(mask), open_files, done)

    def _append(
        self, fs: Any, base: str, values: tuple, table: pa.Table, open_files: dict, done: list
    ) -> None:
        f = open_files.get(values)
        if f is None:
            name = f"part-{self.batch_id:08d}-{uuid.uuid4().hex}.parquet"
            rel = _directory(list(self.partition_by), list(values)) + name
            if base:  # a local directory (object stores have none to make)
                fs.create_dir(base + rel.rpartition("/")[0], recursive=True)
            stream = fs.open_output_stream(base + rel)
            writer = pq.ParquetWriter(stream, table.schema, compression="snappy")
            f = open_files[values] = _Open(
                rel, stream, writer, dict(zip(self.partition_by, values, strict=True))
            )
        f.add(table)
        if f.stream.tell() >= self.target_size:
            self._close(open_files.pop(values), done)

    @staticmethod
    def _close(f: _Open, done: list) -> None:
        f.writer.close()
        f.stream.close()
        done.append(f)

    @staticmethod
    def _actions(fs: Any, base: str, done: list[_Open]) -> pa.RecordBatch:
        now = int(time.time() * 1000)
        sizes = [fs.get_file_info(base + f.relative).size for f in done]
        return pa.RecordBatch.from_pydict(
            {
                "path": [f.relative for f in done],
                "size": sizes,
                "partition_values": [json.dumps(f.partition) for f in done],
                "modification_time": [now] * len(done),
                "stats": [f.stats() for f in done],
            },
            schema=pa.schema(
                [
                    ("path", pa.string()),
                    ("size", pa.int64()),
                    ("partition_values", pa.string()),
                    ("modification_time", pa.int64()),
                    ("stats", pa.string()),
                ]
            ),
        )


def _discard(fs: Any, base: str, f: _Open) -> None:
    """Best effort: remove a file of a task that failed (vacuum takes what this misses)."""
    with contextlib.suppress(Exception):  # already failing; the vacuum is the backstop
        f.writer.close()
        f.stream.close()
    with contextlib.suppress(Exception):
        fs.delete_file(base + f.relative)
