"""Starts the Spark streaming query: file source over the staging dir into foreachBatch."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from checkpoints.journal import planned_batches
from checkpoints.source_log import prune
from ingest.batch.handler import BatchRefused
from ingest.batch.info import Cut
from ingest.config import JobConfig
from ingest.connector.envelope import FILE_COLUMN
from ingest.errors import FatalError, first_line, redact
from ingest.intake.envelope import spark_schema
from ingest.intake.staging import Stager
from ingest.metrics import Metrics
from ingest.storage import hadoop_url

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
PLAN_LOG = logging.getLogger("ingest.batch.query.plan")
"""The query plan: in the start log; on the console only at ``--log-level DEBUG``."""
CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
RENAME_BASED_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def use_rename_checkpoints(spark: SparkSession, checkpoint: str) -> None:
    """Write a local checkpoint through Hadoop's FileSystem API: a temporary file, then a rename.

    Spark's default goes through ``FileContext``, which on the local file system also resolves
    each path's links by forking ``readlink`` (no native library), nearly half of a
    micro-batch's forks. A local rename is atomic, and the checkpoint lock keeps a second
    writer out, so the guarantee is the same. A checkpoint on another scheme (HDFS, S3) keeps
    Spark's default, and a manager the user chose is left alone.
    """
    current = spark.conf.get(CHECKPOINT_MANAGER, None)
    if current not in (None, RENAME_BASED_MANAGER):
        return
    if urlparse(checkpoint).scheme in ("", "file"):
        spark.conf.set(CHECKPOINT_MANAGER, RENAME_BASED_MANAGER)
    elif current is not None:
        spark.conf.unset(CHECKPOINT_MANAGER)


@contextlib.contextmanager
def checkpoint_manager_kept(spark: SparkSession) -> Iterator[None]:
    """Put the session's checkpoint manager setting back as it was once the job's queries ended:
    ``use_rename_checkpoints`` sets it for the job, and a caller's session (a notebook's) is left
    as it was given."""
    before = spark.conf.get(CHECKPOINT_MANAGER, None)
    try:
        yield
    finally:
        try:
            if before is None:
                spark.conf.unset(CHECKPOINT_MANAGER)
            else:
                spark.conf.set(CHECKPOINT_MANAGER, before)
        except Exception as err:  # the session was stopped under the job: nothing to restore
            log.debug("checkpoint manager setting not restored: %s", first_line(str(err)))


class BatchCall:
    """The function foreachBatch runs: a call into the job's handler, cut when the job ends.

    PySpark keeps that function in Py4J's object pool for as long as the JVM holds the query,
    which outlives the job in a process that runs several (a notebook, ``make bench``): holding
    the handler directly kept each finished job alive with its state table and key index.
    """

    def __init__(self, handler: Callable[[DataFrame, int], None]) -> None:
        self._handler: Callable[[DataFrame, int], None] | None = handler
        self.last: int | None = None
        """Set while ``LogRenewal`` stops the query of a workers job: a later batch is refused before
        it reads anything, and the restarted query runs it."""
        self.refused = False
        """A batch was refused so."""

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        handler = self._handler
        if handler is None:
            raise RuntimeError(f"batch {batch_id}: its job has ended")
        if self.last is not None and batch_id > self.last:
            self.refused = True
            raise BatchRefused(f"batch {batch_id} refused: the query restarts to prune its file-source log")
        handler(df, batch_id)

    def release(self) -> None:
        """Let go of the handler (the job has ended)."""
        self._handler = None


def start_query(spark: SparkSession, cfg: JobConfig, handler) -> StreamingQuery:
    """Read staged files with the fixed envelope schema and run ``handler`` per micro-batch.

    One query serves both trigger modes: a drain stops it once the queues are drained
    (``ingest.query_loop.run_query``), so a drain plans the query once, not once
    per round.

    ``_metadata.file_path`` is selected here, on the streaming DataFrame, because it
    cannot be selected inside foreachBatch. ``cleanSource`` removes (or archives) a
    batch's files once the next batch is planned.
    """
    from pyspark.sql import functions as F

    st = cfg.staging
    reader = (
        spark.readStream.format("json")
        .schema(spark_schema())
        .option("pathGlobFilter", "*.jsonl")
        .option("maxFilesPerTrigger", st.max_files_per_trigger)
    )
    if st.clean_source != "off":
        reader = reader.option("cleanSource", st.clean_source)
        if st.clean_source == "archive":
            reader = reader.option("sourceArchiveDir", hadoop_url(st.archive_dir or ""))
    df = reader.load(hadoop_url(st.dir)).select("*", F.col("_metadata.file_path").alias(FILE_COLUMN))
    with contextlib.suppress(Exception):  # the plan is for the start log only
        PLAN_LOG.info("query plan:\n%s", df._jdf.queryExecution().analyzed().treeString())
    use_rename_checkpoints(spark, cfg.checkpoint)
    writer = (
        df.writeStream.foreachBatch(handler)
        .option("checkpointLocation", hadoop_url(cfg.checkpoint))
        .queryName(cfg.name.replace("-", "_").replace(".", "_"))
    )
    writer = writer.trigger(processingTime=f"{int(cfg.trigger.interval * 1000)} milliseconds")
    return writer.start()


class LogRenewal:
    """Keeps Spark's file-source log short in a job that runs for days, by restarting its query.

    Spark lists every file its file source has read in a log in the checkpoint, rewrites all of
    it every 10th batch (``compactInterval``) and keeps its entries in memory for ``maxFileAge``
    (7 days), with no retention option; the log can only be pruned while no query runs
    (``checkpoints.source_log.prune``). A log of hours of staging makes every 10th batch
    hundreds of milliseconds longer, growing with the log (figures:
    ``docs/performance-history.md``, "The file source's log").

    So each time ``staging.max_log_files`` files were staged (since the start, whose prune
    emptied the log of deleted files, or the last renewal), ``renew`` holds new files back,
    lets the query finish what is staged (``processAllAvailable``), stops it while it is
    idle, prunes the log and starts the query again on the same checkpoint. No batch is cut
    short, batch ids follow on, and receivers keep receiving meanwhile (up to the in-flight
    cap). Nothing to prune with ``clean_source: off``: never due then.

    In a workers job (``files`` given: the files its batches read) the stager is in the workers,
    which go on staging: the query may never run out of files, so it runs no batch after those
    planned (``BatchCall.last``) and is stopped between triggers; the restarted query runs the
    batch it refused, as a restart after a stop does.
    """

    def __init__(
        self,
        spark: SparkSession,
        cfg: JobConfig,
        handler: BatchCall,
        stager: Stager,
        metrics: Metrics,
        files: Callable[[], int] | None = None,
    ) -> None:
        self.spark, self.cfg, self.handler, self.stager, self.metrics = spark, cfg, handler, stager, metrics
        self.every = cfg.staging.max_log_files if cfg.staging.clean_source != "off" else 0
        self.files = files or (lambda: stager.files_written)
        """Files staged, or in a workers job read by batches, so far."""
        self.workers = files is not None
        self._since = 0  # the job's start pruned the log before anything was staged
        self.renewing = False
        """A renewal is under way: the query is stopped on purpose."""

    def due(self) -> bool:
        """``every`` files were staged (read) since the job started or the log was last pruned."""
        return bool(self.every) and self.files() - self._since >= self.every

    def _stop(self, query: StreamingQuery) -> bool:
        """Stop ``query`` once what it planned is committed: with staging held, once it has run out
        of files; in a workers job (its stager idle), running no batch after those planned. Return
        False if it failed meanwhile (the job then stops on that failure, as without a renewal)."""
        if not self.workers:
            query.processAllAvailable()
            query.stop()
            return True
        self.handler.last, self.handler.refused = max(planned_batches(self.cfg.checkpoint), default=-1), False
        try:
            while query.isActive and query.status["isTriggerActive"]:
                time.sleep(0.05)
            query.stop()
            return query.exception() is None or self.handler.refused
        finally:
            self.handler.last = None

    def renew(self, query: StreamingQuery) -> StreamingQuery:
        """Stop ``query`` between batches, prune the file-source log, return the query started anew.

        Raises:
            StreamingQueryException: the query failed while finishing what was staged.
        """
        self.renewing, started = True, time.monotonic()
        try:
            with self.stager.held():
                if not self._stop(query):
                    return query
                dropped = prune(self.cfg.checkpoint)
                self._since = self.files()
                renewed = start_query(self.spark, self.cfg, self.handler)
        finally:
            self.renewing = False
        self.metrics.inc("logRenewals")
        self.metrics.inc("prunedLogEntries", dropped)
        log.info(
            "query restarted to prune its file-source log in %.1fs: %d entries of deleted files dropped",
            time.monotonic() - started,
            dropped,
        )
        return renewed


def stop_after_running_batch(query: StreamingQuery, handler, checkpoint: str) -> None:
    """Stop ``query`` once the batch it runs, if any, has finished and Spark has committed it,
    without starting another, however much is staged: a stop's way out.

    Batches planned from now on are refused (``BatchHandler.close``): the query then ends with
    that refusal, or it is stopped while idle between triggers. A trigger that begins at that
    moment is interrupted while planning, or refused before it reads anything; a batch Spark
    planned is replayed by the next start.

    A sink write that may never end (``BatchHandler.held``: SQS under ``failOnError`` false,
    re-sending what its target refuses) is waited for its sink's ``stop_grace``, then cancelled
    with the query: the batch fails uncommitted (``handler.cut_short``), nothing of it is acked,
    and the next start writes it again. Retries under way in the batch's driver (a database
    sink's, a function sink's) end at once (``handler.close``), with the same outcome.
    """
    handler.close(max(planned_batches(checkpoint), default=-1))
    while query.isActive:
        if not query.status["isTriggerActive"]:  # between triggers: the last batch is committed
            query.stop()
            return
        held = handler.held()
        if held is not None:
            handler.cut_short = Cut(held.batch_id, f"sink {held.sink} re-sent what its target refused")
            query.stop()  # cancels the batch's Spark jobs: their tasks' Python workers end
            return
        time.sleep(0.05)


def check_query(query: StreamingQuery, failure: BaseException | None) -> None:
    """Raise if ``query`` failed: ``failure`` (the batch's own error, not Spark's wrapper) when
    there is one, else a ``FatalError`` with the first line of Spark's."""
    err = query.exception()
    if err is None:
        return
    if failure is not None:
        raise failure
    first = first_line(str(err)) or type(err).__name__
    raise FatalError(f"Spark query failed: {redact(first)}")
