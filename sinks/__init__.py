"""Sinks: one folder per target (config, sink), each implementing ``ingest.connector.Sink``.

The job builds them through the registry (``ingest.config.registry.build_sink``).
"""
