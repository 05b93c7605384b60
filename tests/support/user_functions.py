"""Functions a user would name in a job (``tests.support.user_functions:…``): function sinks and
Python transforms, importable by the job's subprocess (it runs from the repository's root).

The stores are plain files a test reads back on its own: a SQLite database and JSON-lines files.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ingest.errors import TransientError
from ingest.sink import SinkContext, WriteReport, sink_options


class SqliteOptions(BaseModel):
    """The SQLite store's options, validated when the job is built."""

    model_config = ConfigDict(extra="forbid")
    path: str
    fail_times: int = 0
    """Raise ``TransientError`` on this many calls first (counted in ``<path>.calls``)."""


def _calls(path: str) -> int:
    """One more call to the store at ``path``: how many there were, this one included."""
    counter = Path(path + ".calls")
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n


@sink_options(SqliteOptions)
def to_sqlite(df: Any, context: SinkContext) -> int:
    """Each batch's rows and its idempotency key in one transaction; a key already held is skipped."""
    opts: SqliteOptions = context.options
    if _calls(opts.path) <= opts.fail_times:
        raise TransientError(f"store {opts.path} busy")
    rows = [(r["event_id"], r["message_id"], json.dumps(r["columns"])) for r in _rows(df)]
    with sqlite3.connect(opts.path) as db:  # one transaction: committed on success, else rolled back
        db.execute("CREATE TABLE IF NOT EXISTS events (event_id, message_id, columns)")
        db.execute("CREATE TABLE IF NOT EXISTS batches (key PRIMARY KEY)")
        if db.execute("SELECT 1 FROM batches WHERE key = ?", (context.idempotency_key,)).fetchone():
            return 0  # a replay of a batch this store holds
        db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        db.execute("INSERT INTO batches VALUES (?)", (context.idempotency_key,))
    return len(rows)


def _rows(df: Any) -> list[dict[str, Any]]:
    columns = [c for c in df.columns if c != "_meta"]
    out = []
    for row in df.collect():
        out.append(
            {"event_id": row["event_id"], "message_id": row["_meta"]["message_id"], "columns": columns}
        )
    return out


def write_jsonl(df: Any, context: SinkContext) -> WriteReport:
    """The contract suite's store: ``<path>/<batch_id>.jsonl``, replaced whole by a replay; a row
    over 1000 bytes is refused (``context.refuse``, the sink's ``on_bad_record``)."""
    out = Path(context.options["path"])
    out.mkdir(parents=True, exist_ok=True)
    lines, rejected = [], []
    for row in df.collect():
        record = row.asDict(recursive=True)
        meta = record.pop("_meta", None) or {}
        text = json.dumps(record)
        if len(text) > 1000:
            rejected.append(context.refuse(meta.get("message_id"), "over 1000 bytes", text))
        else:
            lines.append(text)
    tmp = out / f".{context.batch_id}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, out / f"{context.batch_id}.jsonl")
    return WriteReport(len(lines), rejected)


def add_and_drop(df: Any) -> Any:
    """A Python transform: adds ``doubled`` and ``kind``, drops ``action`` and ``ts``."""
    from pyspark.sql import functions as F

    return df.withColumn("doubled", F.col("amount") * 2).withColumn("kind", F.lit("py")).drop("action", "ts")


def fails_on_rows(df: Any) -> Any:
    """A Python transform that raises on a batch with rows (an empty one, as ``check`` runs, passes)."""
    if not df.isEmpty():
        raise ValueError("cannot enrich these rows")
    return df


def selects_a_missing_column(df: Any, context: SinkContext) -> None:
    """Fails for good with Spark's ``AnalysisException`` (a Py4J error carrying a Java trace): it
    selects a column the batch does not have. The batch fails, nothing is acked."""
    df.select("no_such_column").collect()
