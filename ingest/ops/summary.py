"""The end of a run: its exit code, the summary lines and the metrics file."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

import orjson

from ingest.batch.info import BatchInfo
from ingest.config import JobConfig
from ingest.errors import redact
from ingest.intake.acker import Acker
from ingest.intake.leases import InFlight
from ingest.metrics import Metrics
from ingest.ops.depths import QueueDepths

log = logging.getLogger(__name__)


def per_sink(written: Mapping[str, float], sinks: list[str]) -> str:
    """Rows each sink accepted, in the job's sink order: ``out:300,copy:300`` (a sum over sinks
    would count each message once per sink).

    >>> per_sink({"copy": 300.0, "out": 300.0}, ["out", "copy"])
    'out:300,copy:300'
    """
    return ",".join(f"{name}:{int(written.get(name, 0))}" for name in sinks)


def abort_line(inflight: InFlight) -> str:
    """The one line an abort prints: how many messages it leaves unacked, and when they come back.

    >>> abort_line(InFlight())
    'abort: no message was in flight; nothing to come back'
    """
    n = inflight.count
    if not n:
        return "abort: no message was in flight; nothing to come back"
    return (
        f"abort: {n} message(s) received and not acked stay on their queues; they come back within "
        f"{math.ceil(inflight.visible_again_in())}s (their visibility timeout) and the next run "
        "drops those already written as duplicates"
    )


class RunSummary:
    """What a job tells when it ends, and the metrics file it keeps current."""

    def __init__(
        self, cfg: JobConfig, metrics: Metrics, acker: Acker, depths: QueueDepths, echo: Callable[[str], None]
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.acker = acker
        self.depths = depths
        self.echo = echo
        self._sinks = [s.name for s in cfg.data_sinks]
        """The sinks of the decoded rows: the dead-letter sink's rows are ``deadLettered``."""

    def exit_code(self) -> int:
        """0, or 3 when a committed batch's messages are left unacked (they come back and are
        dropped as duplicates by the next run), with a line saying which."""
        left = self.acker.unacked()
        if left:
            self.echo(f"NOT ACKED: journals of batches {left} wait for their commits/acks")
            return 3
        failed = self.acker.unresolved
        if failed:
            (source, message_id), reason = next(iter(failed.items()))
            self.echo(
                f"NOT ACKED: {len(failed)} message(s) of committed batches could not be deleted "
                f"(e.g. {message_id} from {source}: {redact(reason)}); they come back after their "
                "visibility timeout and the next run drops them as duplicates and deletes them"
            )
            return 3
        return 0

    def batch(self, batch_id: int, info: BatchInfo, in_flight: int) -> None:
        """After each micro-batch: its line (``metrics.print_batches``) and the metrics file."""
        if self.cfg.metrics.print_batches:
            if info.replayed:
                self.echo(f"batch {batch_id}: {info.rows} rows replayed; state already committed, acking")
            else:
                written = per_sink(info.written, self._sinks)
                self.echo(
                    f"batch {batch_id}: rows={info.rows} new={info.new} dropped={info.dropped} "
                    f"bad={info.bad} written={written} latency={info.latency:.2f}s "
                    f"in_flight={in_flight}"
                )
                phases = {k: round(v, 3) for k, v in info.phases.items()}
                log.debug("batch %d phases: %s", batch_id, phases)
        self.write_metrics_file()

    def write_metrics_file(self) -> None:
        """Observability never fails the data path: a metrics file that cannot be written is logged."""
        if not self.cfg.metrics.file:
            return
        try:
            self.metrics.write_file(self.cfg.metrics.file)
        except OSError as err:
            self.metrics.inc("metricsFileErrors")
            log.warning("cannot write metrics.file %s: %s", self.cfg.metrics.file, err)

    def report(self) -> None:
        """The ``summary:`` line (rows written per sink) and the machine-readable ``SUMMARY {json}``
        line (``written``: the rows of all sinks, ``writtenBySink``: each sink's), after the
        queue depths the run ended with are read (not the last periodic reading)."""
        self.depths.get(now=True)
        self.write_metrics_file()
        s = self.metrics.summary()
        by_sink = self.metrics.by_label("written", "sink")
        self.echo(
            "summary: received={received} duplicates={duplicateMessages} written={per_sink} "
            "deleted={deletedMessages} failedDeletes={failedDeletes} staleHandles={staleHandles} "
            "expiredHandles={expiredHandles} deserializationErrors={deserializationErrors}".format(
                per_sink=per_sink(by_sink, self._sinks), **s
            )
        )
        figures = {**s, "writtenBySink": {name: int(by_sink.get(name, 0)) for name in self._sinks}}
        self.echo("SUMMARY " + orjson.dumps(figures).decode())
