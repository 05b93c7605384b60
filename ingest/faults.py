"""Fault injection for the chaos tests: SIGKILL the job (driver and JVM) at a named risky point.

Set ``MQ_INGEST_CRASH_AT=<point>`` (and optionally ``MQ_INGEST_CRASH_AFTER=<n>``, the
occurrence to die at, default 1). Points: ``after_stage`` (a staged file was renamed in,
held by the gate, before Spark reads it), ``during_publish`` (the gate renamed some of its held
files into Spark's listing, the rest still held), ``after_sink`` (sinks written, state not committed),
``before_delta_commit`` (a Delta sink's files written by the executors, its table commit not
made), ``before_jdbc_commit`` (a JDBC sink's staging table written, its transaction not
run), ``after_state`` (state committed, Spark's commit not yet written), ``before_ack``
(Spark committed the batch, deletes not sent), ``before_payload_delete`` (messages deleted,
their claim-check objects not yet), ``during_extend`` (a visibility extension was sent, its
result not recorded). Unset, this costs one dictionary lookup per call.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_lock = threading.Lock()
_seen: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die with SIGKILL, with the driver JVM (the driver's process group and the JVM's), if this
    is the armed point."""
    if os.environ.get("MQ_INGEST_CRASH_AT") != name:
        return
    with _lock:
        _seen[name] = _seen.get(name, 0) + 1
        if _seen[name] < int(os.environ.get("MQ_INGEST_CRASH_AFTER", "1")):
            return
    try:
        jvm = _jvm_pid()
        if (
            jvm is not None
        ):  # in a session and process group of its own (ingest.runtime.spark.launch_driver_jvm)
            os.killpg(jvm, signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


def _jvm_pid() -> int | None:
    """The driver JVM this process launched, if it did (every point runs in the driver)."""
    context = sys.modules.get("pyspark.core.context")
    gateway = getattr(getattr(context, "SparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return proc.pid if proc is not None else None
