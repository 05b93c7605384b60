"""The console's logging: one redacted line a record; stack traces only at ``--log-level DEBUG``.

A failure's one good line is the ``error:`` line ``ingest.run`` prints last; the traces behind
it (Python's, and the Java one a Py4J error carries) go to the start log, which keeps every
record whole, and to the console only at DEBUG. The driver JVM follows the same rule
(``ingest.runtime.spark`` passes it ``jvm_log_properties``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

from ingest.errors import redact

TRACE_ONLY = "trace_only"
"""A record with this attribute set (``extra={TRACE_ONLY: True}``) is for the start log and DEBUG."""
_QUIET_BELOW_DEBUG = ("ingest.batch.query.plan", "py4j.clientserver")
"""Loggers the console shows only at DEBUG: the query plan (a page of it helps no one), and
Py4J's report of a batch's exception (the job reports that exception itself)."""


class ConsoleFormatter(logging.Formatter):
    """Redacts every line; leaves out exception and stack text unless ``traces``."""

    def __init__(self, traces: bool) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.traces = traces

    def format(self, record: logging.LogRecord) -> str:
        if not self.traces and (record.exc_info or record.exc_text or record.stack_info):
            # A copy: the start log's handler formats the same record, trace and all.
            record = logging.makeLogRecord(record.__dict__)
            record.exc_info = record.exc_text = record.stack_info = None
        return redact(super().format(record))


def _for_console(record: logging.LogRecord) -> bool:
    return not getattr(record, TRACE_ONLY, False) and not record.name.startswith(_QUIET_BELOW_DEBUG)


OWN = ("ingest", "sources", "sinks", "checkpoints")
"""mq-ingest's own loggers: the only ones ``DEBUG`` reaches unless another is asked for by name."""
_AT_DEBUG: set[str] = set()
"""The loggers the last ``setup_logging`` put at DEBUG (the next one puts them back)."""


def setup_logging(level: str, debug_loggers: Iterable[str] = ()) -> None:
    """Log to stderr at ``level`` (a name such as ``INFO``), the console rules above applied.

    ``DEBUG`` is for mq-ingest's own loggers (``OWN``); the rest stay at ``INFO``: botocore's
    DEBUG lines carry the access key id and each request's signature. ``debug_loggers`` are
    put at DEBUG by name (``botocore``, ``urllib3``), whatever ``level``.
    """
    debug = level == "DEBUG"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ConsoleFormatter(traces=debug))
    if not debug:
        handler.addFilter(_for_console)
    logging.basicConfig(level="INFO" if debug else level, handlers=[handler], force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # "Found credentials in environment variables.", once for each boto3 session made (the S3
    # stores make several at start); a --debug-logger botocore brings it back.
    logging.getLogger("botocore.credentials").setLevel(logging.WARNING)
    for name in _AT_DEBUG:
        logging.getLogger(name).setLevel(logging.NOTSET)
    _AT_DEBUG.clear()
    for name in (*(OWN if debug else ()), *debug_loggers):
        logging.getLogger(name).setLevel(logging.DEBUG)
        _AT_DEBUG.add(name)
    # PySpark prints an analysis error's query context as a page of JSON, the Java trace in it, on
    # a handler of its own (a SQL text's, or a DataFrame call's such as a function sink's select);
    # the job's error line names the key and carries Spark's first line.
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.CRITICAL)


def jvm_log_properties(traces: bool) -> dict[str, str]:
    """The driver JVM's system properties that ``log4j2.properties`` reads: whether its console
    prints stack traces, and the level of Spark's loggers that report a failed task or batch."""
    return {"mqingest.traces": "full" if traces else "none", "mqingest.failures": "warn" if traces else "off"}


def traces_shown() -> bool:
    """Whether the console shows stack traces (mq-ingest's loggers are at DEBUG)."""
    return logging.getLogger(OWN[0]).isEnabledFor(logging.DEBUG)
