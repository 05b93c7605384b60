"""Console sink: prints each micro-batch's rows to standard output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.connector import WriteReport
from sinks.console.config import ConsoleSinkConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class ConsoleSink:
    """Prints up to ``max_rows`` rows per batch, like Spark's console sink.

    Guarantee: at-least-once — a batch replayed after a crash is printed again.
    """

    plan_write = False
    """``write`` runs the frame's plan twice (a count, then ``show``), and ``show`` may stop early."""

    def __init__(self, cfg: ConsoleSinkConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name

    def write(self, df: DataFrame, batch_id: int) -> WriteReport:
        rows = df.count()
        print(f"-------- batch {batch_id}: {rows} row(s) --------", flush=True)
        df.show(self.cfg.max_rows, truncate=self.cfg.truncate)
        return WriteReport(rows)

    def close(self) -> None:
        pass
