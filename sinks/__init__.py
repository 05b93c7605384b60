"""Sinks: one folder per target (config, sink), each implementing ``ingest.connector.Sink``.

The job builds them through the registry (``ingest.config.registry.build_sink``).

May import: the ground (``ingest.errors``, ``ingest.config``, ``ingest.connector``), and of
``sources`` a queue's client modules only.
Must not be imported by: ``ingest``, ``sources``, ``checkpoints``.

``tests/unit/test_layers.py`` checks both.
"""
