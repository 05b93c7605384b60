"""mq-ingest's public Python API: load or build a job, run it, write its connectors (names below).

    from ingest import Job, load_config

    Job(load_config("job.yaml")).run()        # in a script; returns the exit code
    Job(load_config("job.yaml"), spark=spark).run()  # in a notebook's SparkSession, left running
    IntakeWorker(load_config("job.yaml")).run()  # an intake worker of a job with intake.mode: workers

These names, ``ingest.connector`` (the contracts a connector implements, with their helpers)
and the entry-point groups ``mq_ingest.sources`` and ``mq_ingest.sinks`` are the stable API
(``docs/extending/plugins.md``); everything else may change between releases. They
are imported on first use (PEP 562), so ``import ingest.x`` stays as cheap as it was (and no
import here comes back to a module half-made).
"""

from __future__ import annotations

import importlib
from typing import Any

PUBLIC: dict[str, str] = {
    # Load or build a job, and run it
    "Job": "ingest.pipeline",
    "IntakeWorker": "ingest.intake_worker",
    "JobConfig": "ingest.config",
    "load_config": "ingest.config",
    "parse_config": "ingest.config",
    # Errors: FatalError stops the job, TransientError is retried, ConfigError is a bad config
    "IngestError": "ingest.errors",
    "FatalError": "ingest.errors",
    "TransientError": "ingest.errors",
    "ConfigError": "ingest.errors",
    # Writing a sink
    "Sink": "ingest.connector",
    "WriteReport": "ingest.connector",
    "RefusedRecord": "ingest.connector",
    "refused_record": "ingest.connector",
    "SinkBase": "ingest.config.sink_base",
    "Serialization": "ingest.config.sink_base",
    "SinkDelivery": "ingest.config.connector",
    # Writing a source
    "Source": "ingest.connector",
    "Received": "ingest.connector",
    "AckResult": "ingest.connector",
    "SourceBase": "ingest.config.source_base",
    # Either: its Flink SQL name, and the registry
    "FlinkSql": "ingest.config.connector",
    "GROUPS": "ingest.config.registry",
    "register": "ingest.config.registry",
    "unregister": "ingest.config.registry",
}
"""Each public name → the module that defines it."""

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    """The public names, imported on first use."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(PUBLIC[name]), name)
