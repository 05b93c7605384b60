"""The foreachBatch handler: replay guard, dedup, decode, bad-message policy, sinks, state commit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from checkpoints.journal import AckJournal
from ingest.batch.bad_rows import BadRows
from ingest.batch.books import commit_state, journal_entries, key_column, read_meta
from ingest.batch.deadletter import DeadLetter
from ingest.batch.dedup import row_id, row_id_column, select
from ingest.batch.info import BatchInfo, Cut, SinkWrite
from ingest.batch.transforms import JobTransform, apply_transform
from ingest.config import JobConfig
from ingest.connector import Sink
from ingest.decode.payloads import PAYLOAD_ERROR, resolve_payloads
from ingest.decode.rows import ERROR, Decoder, decode_sources
from ingest.errors import RetriesStopped, stop_retries_with
from ingest.faults import crash_point
from ingest.intake.staged_meta import StagedMeta
from ingest.metrics import Metrics
from ingest.runtime.frames import string_frame

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from checkpoints.state import StateTable
    from ingest.connector.payload_store import PayloadStore

_ISIN_LIMIT = 2000


class BatchRefused(Exception):
    """A micro-batch that started after a stop was asked for: nothing of it was read or written."""


class BatchCut(Exception):
    """A micro-batch a stop cancelled (a sink re-sending without end, or retrying a failed
    step): uncommitted, nothing acked."""


def _retries_stopped(err: BaseException | None) -> RetriesStopped | None:
    """The ``RetriesStopped`` that ``err`` is or was raised from (a sink may wrap it), if any."""
    for _ in range(20):  # a chain can loop
        if err is None or isinstance(err, RetriesStopped):
            return err
        err = err.__cause__ or err.__context__
    return None


class BatchHandler:
    """Called by Spark with each micro-batch of staged envelopes (``foreachBatch``).

    Order of effects, which the crash tests rely on:
      1. the ack journal for ``batch_id`` is written (every row, duplicates and bad ones too);
      2. if the state table already holds ``batch_id`` (a replay after a crash between the
         state commit and Spark's commit), nothing else happens;
      3. rows whose key is in the state table, repeats in the batch and messages enqueued
         before ``startTimeMs`` are dropped and counted;
      4. bodies are decoded and the transform runs; every sink writes the rows that decoded;
      5. undecodable rows follow their source's ``on_bad_message`` (a ``fail`` policy is
         applied before any sink writes);
      6. the new keys and ``batch_id`` are committed to the state table in one commit.
    Spark then writes ``commits/N`` and the acker deletes the journaled messages.
    """

    def __init__(
        self,
        cfg: JobConfig,
        state: StateTable,
        journal: AckJournal,
        sinks: Sequence[Sink],
        dead_letter: DeadLetter | None,
        metrics: Metrics,
        on_done: Callable[[int, BatchInfo], None] = lambda batch_id, info: None,
        on_failed: Callable[[int, BaseException], None] = lambda batch_id, err: None,
        payloads: Mapping[str, PayloadStore] | None = None,
        staged: StagedMeta | None = None,
        guard: Callable[[], None] = lambda: None,
    ) -> None:
        self.cfg = cfg
        self.guard = guard
        """Called before a batch reads or writes anything; raises to fail it (the job's checkpoint
        lock taken over by another instance: ``CheckpointLock.ensure_held``)."""
        self.state = state
        self.journal = journal
        by_name = {s.name: s for s in cfg.data_sinks}
        self.sinks = [(sink, by_name[sink.name]) for sink in sinks]
        """Each sink with its config, bound by name (the dead-letter sink is not among them)."""
        self.metrics = metrics
        self.on_done = on_done
        self.on_failed = on_failed
        self.sources = {s.name: s for s in cfg.sources}
        self.bad_rows = BadRows(self.sources, dead_letter, metrics)
        """The policies for undecodable messages and refused records."""
        self._starts = {s.name: s.start_time_ms for s in cfg.sources if s.start_time_ms is not None}
        self.payloads = dict(payloads or {})
        """Claim-check stores of the sources that have one, shipped to the executors."""
        self.transform = JobTransform(cfg, payloads)
        """The job's transforms: ``transform_function``, then the SQL ``transform``."""
        self.failure: BaseException | None = None
        self.writing: SinkWrite | None = None
        """The sink write under way, if one is (read by ``/healthz`` and by a stop)."""
        self.cut_short: Cut | None = None
        """The batch a stop cancelled (a held write, or retries cut short): it failed, uncommitted,
        on purpose."""
        self._last: int | None = None
        """Set by ``close``: the last batch to run; later ones are refused."""
        self._stopping = threading.Event()
        """Set by ``close``: a batch's retries under way end at once (``stop_retries_with``)."""
        self.files_read = 0
        """Staged files the batches have read (a workers job's log renewals count them)."""
        self.refused: int | None = None
        """The batch refused after ``close``, if one was."""
        self._decoders: dict[tuple, Decoder] = {}
        """Each source's decode plan, built at the first batch and reused (the rows have ``_file``)."""
        self._counts: tuple[Column, Column, Column] | None = None
        """The observation's columns (bad rows, rows) and the good-row filter, built once."""
        self._key_column = key_column(cfg)
        self.staged = staged
        """The batch's meta columns by staged file (``staged_columns``; the job passes it when the
        dedup key is an envelope column), read without Spark: kept in memory as each file was
        staged, or read from the file. None: selected with Spark."""
        self._observed = (
            len(self.sinks) == 1
            and self.sinks[0][0].plan_write
            and all(s.on_bad_message != "fail" for s in cfg.sources)
        )
        """Write in one Spark job and look for bad rows only if the write counted some. Otherwise
        (a ``fail`` policy must stop the batch before any sink sees it; several sinks, or a sink
        writing outside a Spark SQL action) the decoded batch is cached and scanned first."""

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self._last is not None and batch_id > self._last:
            # Planned after a stop was asked for: refused before anything is read or written, so
            # the stop waits for no more than the running batch; the next start replays it.
            self.refused = batch_id
            raise BatchRefused(f"batch {batch_id} refused: the job is stopping")
        try:
            with stop_retries_with(self._stopping):
                self.guard()
                self._handle(df, batch_id)
        except BaseException as err:
            # Spark wraps this in a long StreamingQueryException; the job re-raises the original.
            self.failure = err
            self.on_failed(batch_id, err)
            stopped = _retries_stopped(err)
            if stopped is not None and self.cut_short is None:
                self.cut_short = Cut(batch_id, str(stopped))
            if self.cut_short is not None and self.cut_short.batch_id == batch_id:
                # One short line for Spark, not the cancelled job's Java trace: Spark's stream
                # thread overflows its stack matching a long Py4J message against its own regex.
                raise BatchCut(f"batch {batch_id} cancelled: the job is stopping") from None
            raise

    def close(self, last: int) -> None:
        """Run no batch after ``last`` (the last one Spark planned when a stop was asked for):
        a later one raises ``BatchRefused`` before it reads anything. Retries under way in the
        running batch end at once: the batch fails uncommitted (``cut_short``), nothing acked."""
        self._last = last
        self._stopping.set()

    def held(self) -> SinkWrite | None:
        """The running write if it has outlasted its sink's ``stop_grace`` (a sink that re-sends
        without end, e.g. SQS under ``failOnError`` false): a stop cancels it rather than wait."""
        w = self.writing
        return w if w is not None and w.grace is not None and time.monotonic() - w.since >= w.grace else None

    def _handle(self, df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = lap = time.monotonic()
        phases: dict[str, float] = {}

        def done(phase: str) -> None:
            nonlocal lap
            now = time.monotonic()
            phases[phase] = phases.get(phase, 0.0) + now - lap
            self.metrics.inc("phaseSeconds", now - lap, phase=phase)
            lap = now

        meta, files = read_meta(self.cfg, df, batch_id, self.staged, self._key_column)
        self.files_read += len(files)
        if meta.num_rows == 0:
            return
        done("read meta")
        self.journal.write(batch_id, journal_entries(meta))
        info = BatchInfo(rows=meta.num_rows)
        if self.state.is_committed(batch_id):
            self.metrics.inc("replayedBatches")
            info.replayed = True
            self._forget(files)
            self._finish(batch_id, info, started)
            return
        chosen = select(meta, self.state.unseen, self._starts)
        drops, new_keys = chosen.drops, chosen.new_keys
        for src, n in chosen.duplicates.items():
            self.metrics.inc("duplicateMessages", n, source=src)
        for src, n in chosen.early.items():
            self.metrics.inc("skippedBeforeStart", n, source=src)
        done("dedup")
        pointers = meta["payload_ref"].null_count < meta.num_rows
        decoded = self._decode(self._drop(df, chosen.drop_rows), pointers)
        if self._observed:
            bad = self._write_observed(decoded, batch_id, info, meta.num_rows - len(drops))
        else:
            decoded = decoded.persist()
            try:
                bad = self.bad_rows.undecodable(decoded, batch_id)
                self._write_sinks(decoded.filter(F.col(ERROR).isNull()).drop(ERROR), batch_id, info)
            finally:
                decoded.unpersist()
        done("read+decode+sinks")
        crash_point("after_sink")
        commit_state(self.state, self.cfg, batch_id, new_keys)
        crash_point("after_state")
        if batch_id % self.cfg.state.maintenance_every == 0 and batch_id > 0:
            self.state.maintain()
        done("state commit")
        info.new, info.dropped, info.bad, info.phases = len(new_keys), len(drops), bad, phases
        self._forget(files)
        self._finish(batch_id, info, started)

    def _forget(self, files: list[str]) -> None:
        if self.staged is not None:
            self.staged.forget(files)

    def _write_observed(self, decoded: DataFrame, batch_id: int, info: BatchInfo, messages: int) -> int:
        """One Spark job: the sink's write, counting rows and bad rows on the way.

        The bad rows are read again only if the write counted some, or if it saw fewer rows
        than the batch has messages (every message decodes to at least one row, unless a
        record set is empty): a transform with a ``LIMIT`` may stop reading early, and a bad
        message it never read must still be counted and routed, never vanish.
        """
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        if self._counts is None:  # built once: each Column costs several Py4J calls
            self._counts = (
                F.count(F.col(ERROR)).alias("bad"),
                F.count(F.lit(1)).alias("rows"),
                F.col(ERROR).isNull(),
            )
        bad_rows, rows, good = self._counts
        seen = Observation()
        checked = decoded.observe(seen, bad_rows, rows)
        self._write_sinks(checked.filter(good).drop(ERROR), batch_id, info)
        counted = seen.get
        if not counted["bad"] and counted["rows"] >= messages:
            return 0
        return self.bad_rows.undecodable(decoded, batch_id)

    def _write_sinks(self, good: DataFrame, batch_id: int, info: BatchInfo) -> None:
        out = self._transform(good)
        for sink, sink_cfg in self.sinks:
            self.writing = SinkWrite(sink.name, batch_id, time.monotonic(), sink_cfg.stop_grace())
            try:
                report = sink.write(apply_transform(out, sink_cfg.transform), batch_id)
            finally:
                self.writing = None
            self.metrics.inc("written", report.written, sink=sink.name)
            info.written[sink.name] = report.written
            self.bad_rows.refused(sink.name, report.rejected, batch_id)

    def _finish(self, batch_id: int, info: BatchInfo, started: float) -> None:
        latency = time.monotonic() - started
        self.metrics.inc("batches")
        self.metrics.set("batchLatencySeconds", latency)
        self.metrics.set("batchRows", info.rows)
        info.latency = latency
        self.on_done(batch_id, info)

    @staticmethod
    def _drop(df: DataFrame, rows: list[tuple[str, int | None]]) -> DataFrame:
        """``df`` without the staged lines ``rows`` ((receipt handle, arrival), see ``Selection``)."""
        from pyspark.sql import functions as F

        if not rows:
            return df
        ids = [row_id(h, a) for h, a in rows]
        if len(ids) <= _ISIN_LIMIT:
            return df.filter(~row_id_column().isin(ids))
        drop_df = string_frame(df.sparkSession, ["_drop_row"], [(i,) for i in ids])
        return df.join(F.broadcast(drop_df), row_id_column() == F.col("_drop_row"), "left_anti")

    def _decode(self, df: DataFrame, pointers: bool = False) -> DataFrame:
        """Decode; a batch holding claim-check pointers has their payloads fetched first."""
        from pyspark.sql import functions as F

        sources = list(self.sources.values())
        if not pointers:
            return decode_sources(df, sources, self.cfg.body_schema, decoders=self._decoders)
        resolved = resolve_payloads(df, self.payloads)
        decoded = decode_sources(resolved, sources, self.cfg.body_schema, [PAYLOAD_ERROR], self._decoders)
        return decoded.withColumn(ERROR, F.coalesce(PAYLOAD_ERROR, ERROR)).drop(PAYLOAD_ERROR)

    def _transform(self, good: DataFrame) -> DataFrame:
        return self.transform(good)
