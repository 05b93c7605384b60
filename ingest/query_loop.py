"""Runs a job's streaming query until a stop, the drain's end or every source's end, then settles it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from checkpoints.journal import AckJournal, is_committed
from ingest.batch.handler import BatchHandler
from ingest.config import JobConfig
from ingest.connector import Source
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight
from ingest.intake.parts import holds_messages
from ingest.intake.publisher import Publisher
from ingest.intake.receiver import ReceiverPool
from ingest.intake.staging import Stager
from ingest.metrics import Metrics
from ingest.ops.depths import QueueDepths
from ingest.ops.drain import DrainProgress, DrainRule, finished
from ingest.ops.job_events import JobEvents
from ingest.ops.job_health import Liveness
from ingest.ops.summary import RunSummary
from ingest.supervisor import Supervisor


class JobParts(Protocol):
    """What the loop reads of its job (``ingest.pipeline.Job``), and the two it sets for ``/healthz``."""

    cfg: JobConfig
    echo: Callable[[str], object]
    stop_requested: threading.Event
    running: threading.Event
    query: Any
    """The running StreamingQuery, set here once started."""
    renewal: Any
    """The query's ``LogRenewal``, set here once started."""
    supervisor: Supervisor
    sources: dict[str, Source]
    receivers: ReceiverPool
    stager: Stager
    inflight: InFlight
    acker: Acker
    journal: AckJournal
    metrics: Metrics
    depths: QueueDepths
    progress: DrainProgress
    liveness: Liveness
    events: JobEvents
    summary: RunSummary


def run_query(job: JobParts, spark, handler: BatchHandler, drain: bool) -> int:
    """Run one streaming query until ``job.stop()`` or, when ``drain``, until the queues are drained.

    The query is started once, with a processing-time trigger, and reads what the
    receivers stage while they keep polling, so receiving, Spark and acks overlap. When
    draining, ``DrainRule`` says when the queues are drained; then the receivers stop and
    the query takes whatever they staged before it stops. In either mode, once every
    source is bounded and exhausted and nothing is busy, the job stops the same way.
    Returns the job's exit code.
    """
    from ingest.batch.query import (
        BatchCall,
        LogRenewal,
        check_query,
        start_query,
        stop_after_running_batch,
    )

    cfg = job.cfg
    call = BatchCall(handler)
    query = job.query = start_query(spark, cfg, call)
    files = (lambda: handler.files_read) if cfg.intake.mode == "workers" else None  # staged by workers
    renewal = job.renewal = LogRenewal(spark, cfg, call, job.stager, job.metrics, files)
    job.liveness.progressed()
    job.progress.restart()
    job.events.started()
    job.running.set()
    if not drain:
        job.echo(f"job {cfg.name} streaming (query {query.id}); stop with Ctrl-C or SIGTERM")
    rule = DrainRule(cfg.trigger.idle_rounds, cfg.trigger.max_rounds or 0)
    drained = False
    try:
        while query.isActive and not job.stop_requested.is_set():
            job.supervisor.check()
            job.depths.get()
            if renewal.due():
                query = job.query = renewal.renew(query)
            if finished(job.sources.values()) and not busy(job):
                job.echo("all sources are bounded and finished: stopping")
                break
            if drain:
                if isinstance(job.acker, Publisher):  # a workers job: the workers' drains end it
                    done = job.acker.workers_done() and not busy(job)
                else:
                    done = rule.drained(busy(job), job.receivers.threads, int(job.metrics.total("batches")))
                if done:
                    drained = True
                    break
                job.progress.tick()
            job.stop_requested.wait(0.05 if drain else 0.2)
        check_query(query, handler.failure)
        if job.stop_requested.is_set():
            job.receivers.stop(timeout=0)  # their long polls end while the batch finishes
            stop_after_running_batch(query, handler, cfg.checkpoint)
        else:
            # Drained: a receive still in flight may yet return messages, which the last batch
            # takes, so the drain ends with nothing received left unwritten.
            job.receivers.stop(keep=drained)
            job.supervisor.check()
            job.stager.flush()
            query.processAllAvailable()
    finally:
        if query.isActive:
            query.stop()
        call.release()
    cut = handler.cut_short
    if cut is not None and not is_committed(cfg.checkpoint, cut.batch_id):
        job.journal.done(cut.batch_id)  # uncommitted: its replay at the next start journals it anew
        job.echo(
            f"stopped: batch {cut.batch_id} cancelled while {cut.why}; nothing of it is acked, "
            "the next start writes it again"
        )
    elif handler.refused is None or handler.failure is not None:
        check_query(query, handler.failure)
    job.acker.reconcile()
    return job.summary.exit_code()


def busy(job: JobParts) -> bool:
    """Whether the job's messages are in flight, staged but unflushed, or committed but not yet acked."""
    return holds_messages(job.inflight, job.acker, job.stager)
