"""Wires a job together: receivers, staging, leases, the Spark query, state, sinks and the acker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from checkpoints.journal import AckJournal, own_dir
from checkpoints.lock import CheckpointLock
from checkpoints.owner import record_owner
from checkpoints.source_log import committed_files
from ingest.batch.books import staged_columns
from ingest.batch.check import check_job
from ingest.batch.deadletter import DeadLetter
from ingest.batch.handler import BatchHandler
from ingest.batch.info import BatchInfo
from ingest.batch.query import checkpoint_manager_kept
from ingest.config import JobConfig
from ingest.config.registry import build_sink
from ingest.connector.payload_store import payload_stores
from ingest.decode.rows import check_supported
from ingest.errors import FatalError, redact
from ingest.intake.acker import Acker
from ingest.intake.parts import Intake, ack_options
from ingest.intake.probe import probe_sources
from ingest.intake.processes import make_source
from ingest.intake.publisher import Publisher
from ingest.intake.receiver import release_in_flight
from ingest.intake.recovery import check_owners, drop_unplanned, queues_of, recover
from ingest.intake.staged_meta import StagedMeta
from ingest.metrics import Metrics
from ingest.ops.depths import QueueDepths
from ingest.ops.drain import DrainProgress
from ingest.ops.health import Endpoint
from ingest.ops.job_events import JobEvents
from ingest.ops.job_health import Liveness
from ingest.ops.summary import RunSummary
from ingest.query_loop import run_query
from ingest.runtime.memory import streaming_gc
from ingest.runtime.s3a import job_conf
from ingest.runtime.spark import connector_conf, driver_jvm_pid, make_session
from ingest.supervisor import Supervisor

log = logging.getLogger(__name__)


class Job:
    """One mq-ingest job. ``run()`` returns the process exit code.

    Continuous (``trigger.mode: processing_time``): receivers, the query, the lease keeper
    and the acker run until ``stop()`` (SIGTERM/SIGINT), then the running batch is finished
    and acked and every other message received is given back to its queue. Drain
    (``available_now``): until the queues are drained, then everything staged is processed and
    acked (see ``ingest.query_loop.run_query``); a stop ends it as it ends a continuous job.
    Exits non-zero if a committed batch is left unacked.
    The background threads run under ``supervisor``, whose first failure ends the run; the
    checkpoint lock is held for exactly the run.
    """

    def __init__(
        self,
        cfg: JobConfig,
        echo=print,
        start_log=None,
        reload: Callable[[], JobConfig] | None = None,
        spark: Any = None,
    ) -> None:
        """Build the job's parts; nothing runs until ``run()``.

        Args:
            cfg: the validated job config (``ingest.load_config``, ``ingest.parse_config``).
            echo: prints the progress lines and the summary.
            start_log: the ``StartLogCapture`` attached to the root logger at process start,
                for the JOB_START_LOG of job event delivery (a new one when None).
            reload: re-reads the job's config; delivery settings changed in it take effect
                while the job runs (``ingest.ops.job_events.JobEvents``).
            spark: a SparkSession to run in as it is (a notebook's, an application's); None:
                the session the job's ``spark`` section describes, or the active one, which
                Spark's builder reuses. The job never stops a session.
        """
        self.cfg = cfg
        self.given_spark = spark
        self.echo = echo
        self.metrics = Metrics(cfg.name)
        self.stop_requested = threading.Event()
        self.running = threading.Event()
        """Set once the streaming query has started."""
        self.query: Any = None
        """The running StreamingQuery, once started."""
        self.renewal: Any = None
        """The query's ``LogRenewal``, once started."""
        self.handler: BatchHandler | None = None
        """The foreachBatch handler, once the run has made it (``/healthz`` reads its sink writes)."""
        self.endpoint: Endpoint | None = None
        self.supervisor = Supervisor()
        self.sources = {s.name: make_source(s) for s in cfg.sources}
        self.payloads = payload_stores(self.sources)
        self.sinks = [build_sink(s) for s in cfg.data_sinks]
        self.dead_letter = DeadLetter.of(cfg)
        self.depths = QueueDepths(self.sources, self.metrics, cfg.metrics.queue_depth_interval)
        self.journal = AckJournal(own_dir(cfg.checkpoint))
        columns = staged_columns(cfg)
        # Room for every message in flight: the files of a batch not yet run are all kept.
        self.staged_meta = StagedMeta(columns, 2 * cfg.staging.max_in_flight) if columns else None
        deleting = cfg.staging.clean_source == "delete"
        # Its events are made below; the receivers report through them once started.
        intake = Intake(
            cfg,
            self.sources,
            self.metrics,
            lambda name, text: self.events.event(name, text),
            on_file=self.staged_meta.add if self.staged_meta is not None else lambda path, data: None,
            # Emptied only where Spark deletes them anyway: an archived file keeps its lines.
            reclaimable=lambda: committed_files(cfg.checkpoint) if deleting else (),
        )
        self.inflight, self.stager, self.keeper = intake.inflight, intake.stager, intake.keeper
        self.receivers = intake.receivers
        self.workers = cfg.intake.mode == "workers"
        """Intake workers receive (``mq-ingest intake``); this process runs no receivers, no stager
        and no lease keeper, and its publisher hands each worker the acks of what has committed."""
        acks = ack_options(cfg, self.payloads, cfg.checkpoint)
        self.acker: Acker = (
            Publisher(cfg, self.journal, self.sources, self.metrics, **acks)
            if self.workers
            else Acker(
                cfg.checkpoint,
                self.journal,
                self.sources,
                inflight=self.inflight,
                metrics=self.metrics,
                **acks,
            )
        )
        # A lease on object storage may be taken over (this process paused past its stale time):
        # the job then stops, and each batch checks it before it writes.
        self.lock = CheckpointLock(cfg.checkpoint, on_lost=lambda why: self.supervisor.fail(FatalError(why)))
        self.spark = None
        self.events: JobEvents = JobEvents(
            cfg, self.metrics, lambda: self.spark, self.sources, start_log, reload
        )
        self.summary = RunSummary(cfg, self.metrics, self.acker, self.depths, echo)
        sinks = [s.name for s in cfg.data_sinks]
        self.progress = DrainProgress(cfg.trigger.progress_interval, self.metrics, self.depths, sinks, echo)
        self.liveness = Liveness.of(self.supervisor, intake, cfg, self.stop_requested)

    # ----- lifecycle -----------------------------------------------------------------

    def run(self) -> int:
        """Run the job to its end (see the class docstring); report it to the delivery targets."""
        self.events.start()
        try:
            code = self._run()
        except BaseException as err:
            self.events.close("FAILED", redact(f"{type(err).__name__}: {err}"))
            raise
        if code == 0:
            self.events.close("FINISHED")
        else:
            self.events.close("FAILED", f"exit code {code}: committed batches left unacked")
        return code

    def _run(self) -> int:
        for s in self.cfg.sources:
            check_supported(s.name, s, self.cfg.body_schema)
        check_owners(self.cfg, self.sources)
        with self.lock:  # released however the run ends
            record_owner(self.cfg.checkpoint, self.cfg.name, queues_of(self.cfg, self.sources))
            return self._run_locked()

    def _run_locked(self) -> int:
        for source in self.sources.values():
            line = source.prepare()
            if line:
                self.echo(line)
        state = recover(self.cfg, self.acker, self.stager, self.echo)
        if self.workers:  # Spark's file source needs the staging dir, and workers may start later
            try:
                self.stager.staged.prepare()
            except OSError as err:
                raise FatalError(f"staging dir {self.cfg.staging.dir}: {err.strerror or err}") from None
        # Reachable, and deletes allowed? Else stop before reading anything.
        probe_sources(self.sources.values(), drain=self.cfg.trigger.mode == "available_now")
        try:
            # Stopped in reverse: the receivers first, then the stager's last flush, as before.
            intake = (self.acker,) if self.workers else (self.keeper, self.acker, self.stager, self.receivers)
            for part in intake:
                self.supervisor.start(part)  # the receivers receive while the SparkSession starts
            spark = self.spark = self.given_spark or make_session(
                self.cfg.spark.master,
                self.cfg.name,
                job_conf(self.cfg, connector_conf(self.cfg.spark.conf, self.cfg.sinks)),
                self.cfg.spark.log_level,
                self.cfg.spark.class_data_sharing,
            )
            self.lock.record_jvm(driver_jvm_pid(spark))
            check_job(self.cfg, spark)
            handler = self.handler = BatchHandler(
                self.cfg,
                state,
                self.journal,
                self.sinks,
                self.dead_letter,
                self.metrics,
                self._batch_done,
                on_failed=self.events.batch_failed,
                payloads=self.payloads,
                staged=self.staged_meta,
                guard=self.lock.ensure_held,
            )
            if self.cfg.metrics.port is not None:
                self.endpoint = Endpoint(
                    self.metrics.registry, self.health, self.cfg.metrics.host, self.cfg.metrics.port
                )
                self.supervisor.start(self.endpoint)
            with streaming_gc(), checkpoint_manager_kept(spark):
                code = run_query(self, spark, handler, drain=self.cfg.trigger.mode == "available_now")
        finally:
            self._shutdown()
        self.summary.report()
        return code

    def stop(self) -> None:
        """Ask for a graceful stop (finish the running batch, ack it, exit)."""
        first = not self.stop_requested.is_set()
        self.stop_requested.set()  # first: a second signal from now on aborts
        if first:
            self.events.event("STOPPING", "stop requested: finishing the running batch, then acking it")

    def _shutdown(self) -> None:
        self.supervisor.stop()  # the parts in reverse: endpoint, receivers, stager, acker, keeper
        try:
            self.acker.reconcile()
        except Exception:
            log.exception("final ack pass failed; the next start acks committed batches")
        if self.stop_requested.is_set() and not self.workers:
            drop_unplanned(self.cfg, self.stager)  # their messages are released below
        # Whatever is still in flight comes back at once for the next run (and is deduplicated).
        reset = [s.name for s in self.cfg.sources if s.reset_visibility]
        released = release_in_flight(self.sources, self.inflight, reset)
        if released and self.stop_requested.is_set():
            self.echo(f"stopped: {released} message(s) received but not written are back on their queues")
        for source in self.sources.values():
            source.close()
        for sink in self.sinks:
            sink.close()
        if self.dead_letter is not None:
            self.dead_letter.close()

    # ----- parts ---------------------------------------------------------------------

    def health(self) -> str | None:
        """Why the job cannot make progress (``GET /healthz`` answers 503 with it), or None
        (see ``ingest.ops.job_health.Liveness``)."""
        writing = self.handler.writing if self.handler is not None else None
        why = self.liveness.reason(self.query, self.renewal is not None and self.renewal.renewing, writing)
        if why is None and isinstance(self.acker, Publisher) and self.acker.swept and not self.acker.live:
            why = f"waiting for intake workers: none is running on staging {self.cfg.staging.dir}"
        return why

    def _batch_done(self, batch_id: int, info: BatchInfo) -> None:
        self.liveness.progressed()
        if info.replayed:
            self.events.batch_replayed(batch_id, info.rows)
        self.metrics.set("inFlight", self.inflight.count)
        self.metrics.set("inFlightBytes", self.inflight.bytes)
        self.summary.batch(batch_id, info, self.inflight.count)
        self.acker.notify()
