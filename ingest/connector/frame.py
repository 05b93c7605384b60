"""Turns a micro-batch DataFrame into the send frame queue sinks write: body, source id, group, dedup id."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ingest.connector.envelope import META
from ingest.connector.sink import RefusedRecord, WriteReport
from ingest.errors import FatalError, IngestError, TransientError, redact

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from ingest.config.sink_base import Serialization


def body_column(df: DataFrame, cfg: Serialization) -> Column:
    """The message body as a string column: one column as is, or the row serialized as json/csv.

    The ``_meta`` struct is never part of a serialized row.
    """
    from pyspark.sql import functions as F

    if cfg.body_column:
        if cfg.body_column not in df.columns:
            raise ValueError(f"body_column {cfg.body_column!r} is not a column; have {df.columns}")
        return F.col(cfg.body_column).cast("string")
    cols = [F.col(c) for c in df.columns if c != META]
    if cfg.body_format == "csv":
        return F.to_csv(F.struct(*cols))
    if cfg.body_format == "raw":
        if len(cols) != 1:
            raise ValueError("body_format raw needs exactly one column (or set body_column)")
        return cols[0].cast("string")
    return F.to_json(F.struct(*cols))


def send_frame(df: DataFrame, cfg: Serialization, extra: dict[str, Column] | None = None) -> DataFrame:
    """Select ``body`` and ``source_id`` (the source message id, or null) plus ``extra`` columns."""
    from pyspark.sql import functions as F

    source_id = F.col(f"{META}.message_id") if META in df.columns else F.lit(None).cast("string")
    cols = [body_column(df, cfg).alias("body"), source_id.alias("source_id")]
    cols += [c.alias(name) for name, c in (extra or {}).items()]
    return df.select(*cols)


def write_partitions(
    frame: DataFrame, writer: Callable[[Iterable[Any]], tuple[int, list[RefusedRecord]]]
) -> WriteReport:
    """Run ``writer`` on every partition on the executors; return (rows written, rejected records).

    ``writer`` gets an iterator of Rows and returns how many it wrote and the records it
    refused for good (``RefusedRecord``, sent back to the driver for the dead-letter target).
    An exception fails the Spark job and so the micro-batch, which Spark replays; an
    ``IngestError`` the writer raised comes back as itself, not as Spark's wrapper.
    """

    def run(rows: Iterator[Any]) -> Iterator[tuple[int, list[RefusedRecord]]]:
        yield writer(rows)

    written, rejected = 0, []
    with executor_errors():
        results = frame.rdd.mapPartitions(run).collect()  # type: ignore[arg-type]  # Rows in, as typed
    for count, rej in results:
        written += count
        rejected += rej
    return WriteReport(written, rejected)


@contextlib.contextmanager
def executor_errors() -> Iterator[None]:
    """Around a Spark action whose tasks may raise ``FatalError`` or ``TransientError``: raise
    that error as itself (``executor_error``), not as Spark's wrapper; other errors as they are."""
    try:
        yield
    except IngestError:
        raise
    except Exception as err:
        found = executor_error(err)
        if found is err:
            raise
        raise found from err


_EXECUTOR_ERROR = re.compile(r"ingest\.errors\.(FatalError|TransientError): (.+)")


def executor_error(err: Exception) -> Exception:
    """Our error class and message where Spark wrapped an executor's ``FatalError`` or
    ``TransientError`` in its own exception; ``err`` itself otherwise."""
    found = _EXECUTOR_ERROR.findall(str(err))
    if not found:
        return err
    cls = FatalError if found[-1][0] == "FatalError" else TransientError
    return cls(redact(found[-1][1]))
