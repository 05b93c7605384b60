"""Queue sources: one folder per queue (config, source, client), each an ``ingest.connector.Source``.

The job builds them through the registry (``ingest.config.registry.build_source``).
"""
