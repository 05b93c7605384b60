"""What a connector author imports: the contracts a source or a sink implements, and their helpers.

    from ingest.connector import Received, Sink, SinkBase, Source, SourceBase, WriteReport

A connector is a config class (``SourceBase`` or ``SinkBase``: its options, its implementation
``"module:Class"``, its Flink SQL name ``FlinkSql``, a sink's ``SinkDelivery``) and the class it
names, which implements ``Source`` or ``Sink``. The job reaches it only through the registry
(``ingest.config.registry``, entry points). ``docs/extending/plugins.md`` is the page to read.

* A source: ``Source`` (receive, ack, extend, release, close; ``probe``, ``lag``, ``prepare``,
  ``exhausted`` and the capabilities ``can_probe``, ``reports_lag``, ``bounded``), which
  returns ``Received`` messages and ``AckResult``.
* A sink: ``Sink`` (write one micro-batch, close; ``plan_write``; ``check_target`` where its
  config sets ``checks_target``), whose ``write`` returns a ``WriteReport`` of the rows written
  and the ``RefusedRecord`` it refused under ``on_bad_record`` (``refused_record``). Its config
  declares the jars it needs in the Spark session (``SinkBase.spark_jars``) and takes what it
  needs of the job (``SinkBase.for_job``).
* The staged envelope: its ``FIELDS`` (a sink finds them in the ``_meta`` column, ``META``;
  ``STAGING_FIELDS`` serve the job only), a binary attribute's ``BINARY_PREFIX``.
* For a queue sink: the send frame (``send_frame``, ``body_column``), a write on the executors
  (``write_partitions``, ``executor_errors``), and the buffer that sends rows in multi-entry
  calls (``SendBuffer`` over a ``SendTarget``, with ``Limits``, ``RetryPolicy``, ``Failed``,
  ``CallRefused``, ``write_rows``).
* The errors: ``FatalError`` (retrying cannot help) and ``TransientError`` (worth retrying).
* Claim-check, for a queue connector that offloads large payloads: ``ingest.connector.claim_check``.

Kept for one release, the old homes re-export these names: ``sources.base``, ``sinks.base``,
``sinks.batch_target``, ``sinks.batching`` and ``sinks.frame``.

May import: the ground only (``ingest.errors``, ``ingest.config``): no connector, no part of the job.
Must not be imported by: nothing; connectors and the framework alike build on it.

``tests/unit/test_layers.py`` checks both.
"""

from __future__ import annotations

from ingest.config.connector import FlinkSql, Guarantee, SinkDelivery
from ingest.config.sink_base import Serialization, SinkBase
from ingest.config.source_base import SourceBase
from ingest.connector.envelope import BINARY_PREFIX, FIELDS, META, STAGING_FIELDS
from ingest.connector.frame import body_column, executor_error, executor_errors, send_frame, write_partitions
from ingest.connector.send_buffer import SendBuffer, write_rows
from ingest.connector.send_target import CallRefused, Failed, Limits, RetryPolicy, SendTarget
from ingest.connector.sink import RefusedRecord, Sink, WriteReport, refused_record
from ingest.connector.source import AckResult, Received, Source
from ingest.errors import FatalError, TransientError

__all__ = [
    "BINARY_PREFIX",
    "FIELDS",
    "META",
    "STAGING_FIELDS",
    "AckResult",
    "CallRefused",
    "Failed",
    "FatalError",
    "FlinkSql",
    "Guarantee",
    "Limits",
    "Received",
    "RefusedRecord",
    "RetryPolicy",
    "SendBuffer",
    "SendTarget",
    "Serialization",
    "Sink",
    "SinkBase",
    "SinkDelivery",
    "Source",
    "SourceBase",
    "TransientError",
    "WriteReport",
    "body_column",
    "executor_error",
    "executor_errors",
    "refused_record",
    "send_frame",
    "write_partitions",
    "write_rows",
]
