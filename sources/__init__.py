"""Queue sources: one folder per queue (config, source, client), each an ``ingest.connector.Source``.

The job builds them through the registry (``ingest.config.registry.build_source``).

May import: the ground (``ingest.errors``, ``ingest.config``, ``ingest.connector``).
Must not be imported by: ``ingest`` (but ``ingest.tools``, whose fake-queue command drives the fake
queue), ``checkpoints``; ``sinks`` only a queue's client modules.

``tests/unit/test_layers.py`` checks both.
"""
