"""Job metrics: counters and gauges, exposed as Prometheus text (file and HTTP) and a summary."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

COUNTERS = {
    "received": "Messages received from a source",
    "staged": "Messages written to staged files",
    "duplicateMessages": "Messages dropped as duplicates (redelivery, replay, repeats in a batch)",
    "deletedMessages": "Messages deleted from their queue after their batch committed",
    "failedDeletes": "Deletes that failed after retries (the message comes back and is deduplicated)",
    "deletedPayloads": "Claim-check payload objects deleted after their messages were acked",
    "failedPayloadDeletes": "Claim-check payload objects left behind: their delete failed (orphans)",
    "staleHandles": "Deletes the queue refused for handles from a previous run (a replayed batch); expected",
    "expiredHandles": "Deletes not sent because the handle was past its visibility timeout (the message "
    "comes back, is dropped as a duplicate and deleted)",
    "deserializationErrors": "Messages whose body could not be decoded",
    "deadLettered": "Undecodable messages routed to the dead-letter target",
    "skippedBeforeStart": "Messages enqueued before startTimeMs, skipped and acked",
    "written": "Rows accepted by a sink",
    "rejectedRecords": "Records a sink refused for good (oversized, invalid), by on_bad_record action",
    "extended": "Visibility extensions of in-flight messages",
    "batches": "Micro-batches processed",
    "phaseSeconds": "Seconds spent in each phase of the pipeline (receive, stage, read meta, dedup, "
    "read+decode+sinks, state commit, ack), summed over threads",
    "replayedBatches": "Micro-batches replayed after a crash whose state was already committed",
    "backpressurePauses": "Times a receiver paused because in-flight or staged caps were reached",
    "receiveErrors": "Receives that failed for a reason worth retrying (queue unreachable, 5xx, throttled)",
    "metricsFileErrors": "Times metrics.file could not be written (logged; the batch goes on)",
    "deliveryDelivered": "Job event messages a delivery channel accepted",
    "deliveryDropped": "Job event messages dropped (channel queue full, channel resting, job closing)",
    "deliveryFailed": "Job event messages a delivery channel refused after its retries",
    "deliveryErrors": "Errors of a delivery channel's own sender thread (logged with a traceback)",
    "keptMessages": "Messages of committed batches left on their queue (the source's delete_message: false)",
    "redeliveredMessages": "Messages received that the queue had delivered before (receive count above 1)",
    "ackLatencySeconds": "Seconds from receive to delete, summed over deleted messages "
    "(divided by deletedMessages: the mean)",
    "logRenewals": "Query restarts between batches to prune Spark's file-source log (staging.max_log_files)",
    "prunedLogEntries": "Entries of deleted staged files dropped from Spark's file-source log",
    "publishedAcks": "Messages of committed batches whose deletes the job handed to the intake worker "
    "holding them (intake.mode: workers), by worker",
}
"""The declared counters and their help: ``Metrics.inc``, ``total`` and ``by_label`` take only these
names (``tests/unit/test_metric_names.py`` checks every name the code uses)."""
GAUGES = {
    "inFlight": "Messages received and not yet acked",
    "inFlightBytes": "Body bytes of messages received and not yet acked",
    "batchLatencySeconds": "Wall time of the last foreachBatch",
    "batchRows": "Rows in the last micro-batch",
    "queueDepth": "Messages waiting on a source's queue, as the queue last reported (sources that report it)",
    "ackLatencyMaxSeconds": "Seconds from receive to delete of the oldest message of a source's "
    "latest ack pass",
    "intakeWorkers": "Intake workers whose lease the job found held at its last look (intake.mode: workers)",
}
"""The declared gauges and their help: ``Metrics.set`` and ``gauge`` take only these names."""


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


class Metrics(Collector):
    """Thread-safe counters keyed by name and labels; also a Prometheus collector."""

    def __init__(self, job: str, worker: str | None = None) -> None:
        self.job = job
        self.worker = worker
        """An intake worker's id, a label of every figure it exports (``worker``)."""
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def inc(self, name: str, n: float = 1, **labels: str) -> None:
        if name not in COUNTERS:
            raise KeyError(name)
        if n:
            with self._lock:
                self._counters[(name, tuple(sorted(labels.items())))] += n

    def set(self, name: str, value: float, **labels: str) -> None:
        if name not in GAUGES:
            raise KeyError(name)
        with self._lock:
            self._gauges[(name, tuple(sorted(labels.items())))] = value

    def gauge(self, name: str, **labels: str) -> float | None:
        """A gauge's value (None if never set)."""
        with self._lock:
            return self._gauges.get((name, tuple(sorted(labels.items()))))

    def total(self, name: str) -> float:
        with self._lock:
            return sum(v for (n, _), v in self._counters.items() if n == name)

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """Totals of counter ``name`` per value of ``label``."""
        out: dict[str, float] = defaultdict(float)
        with self._lock:
            for (n, labels), value in self._counters.items():
                if n == name:
                    out[dict(labels).get(label, "")] += value
        return dict(out)

    def summary(self) -> dict[str, int]:
        """The figures printed at the end of a run, with the reference connector's names."""
        keys = ["received", "duplicateMessages", "written", "deletedMessages", "failedDeletes"]
        keys += ["staleHandles", "expiredHandles", "deserializationErrors", "deadLettered"]
        keys += ["skippedBeforeStart", "batches"]
        return {k: int(self.total(k)) for k in keys}

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        with self._lock:
            counters = dict(self._counters)
            gauges = dict(self._gauges)
        for kind, docs, values in (
            (CounterMetricFamily, COUNTERS, counters),
            (GaugeMetricFamily, GAUGES, gauges),
        ):
            for name, doc in docs.items():
                label_names = sorted({k for (n, labels) in values if n == name for k, _ in labels})
                own = ["job", "worker"] if self.worker is not None else ["job"]
                mine = [self.job, self.worker] if self.worker is not None else [self.job]
                fam = kind(f"mq_ingest_{_snake(name)}", doc, labels=[*own, *label_names])
                for (n, labels), value in values.items():
                    if n == name:
                        d = dict(labels)
                        fam.add_metric([*mine, *(d.get(k, "") for k in label_names)], value)
                if kind is GaugeMetricFamily and not label_names and (name, ()) not in values:
                    fam.add_metric(mine, 0.0)  # unlabeled gauges are always there
                yield fam

    def write_file(self, path: str) -> None:
        write_to_textfile(path, self.registry)
