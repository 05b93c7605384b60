"""Keeps a few envelope columns of each file this process stages, parsed while the file is written."""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import pyarrow as pa

from ingest.intake.envelope import parse_columns, read_columns

log = logging.getLogger(__name__)


class StagedMeta:
    """The columns a micro-batch needs before Spark runs (source, handle, key, timestamps), by file.

    The batch handler reads these columns of every message of a batch before its Spark
    job. Parsing them from the bytes the stager has just written, in the thread that
    staged them, takes that parse off the micro-batch's path (pyarrow parses without
    holding the GIL). A file staged before a restart, or evicted, is read from disk: the
    result is the same table either way, parsed from the same bytes.

    At most ``max_rows`` rows are kept; the oldest files go first. Files are forgotten once
    their batch is done.
    """

    def __init__(self, columns: Sequence[str], max_rows: int) -> None:
        self.columns = list(columns)
        self.max_rows = max_rows
        self._tables: OrderedDict[str, pa.Table] = OrderedDict()
        self._rows = 0
        self._lock = threading.Lock()
        self._warned = False

    def add(self, path: str, data: bytes) -> None:
        """Parse ``data``, the whole content of the staged file ``path``; never raises."""
        try:
            table = parse_columns(pa.BufferReader(data), len(data), self.columns)
        except Exception as err:  # the batch reads the file instead; the job goes on
            if not self._warned:
                log.warning(
                    "staged file %s: columns not kept in memory (read from disk instead): %s", path, err
                )
                self._warned = True
            return
        with self._lock:
            self._tables[os.path.basename(path)] = table
            self._rows += table.num_rows
            while self._rows > self.max_rows and len(self._tables) > 1:
                self._rows -= self._tables.popitem(last=False)[1].num_rows

    def read(self, paths: Sequence[str]) -> pa.Table:
        """The columns of ``paths``, in file and line order: from memory, else from the staging dir.

        Raises:
            OSError: a file not kept is not in the staging dir (or its S3 store cannot be read).
        """
        with self._lock:
            kept = [(p, self._tables.get(os.path.basename(p))) for p in paths]
        missing = [p for p, t in kept if t is None]
        if not kept or len(missing) == len(kept):
            return read_columns(missing, self.columns)
        tables = [t if t is not None else read_columns([p], self.columns) for p, t in kept]
        return pa.concat_tables(tables)

    def forget(self, paths: Sequence[str]) -> None:
        with self._lock:
            for p in paths:
                table = self._tables.pop(os.path.basename(p), None)
                if table is not None:
                    self._rows -= table.num_rows

    def __len__(self) -> int:
        return len(self._tables)
