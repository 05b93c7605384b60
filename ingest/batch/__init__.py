"""One micro-batch: the Spark query, the foreachBatch handler, dedup, transforms, bad rows, checks.

May import: the ground, ``checkpoints``, ``ingest.runtime``, ``ingest.intake``, ``ingest.decode``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``,
``ingest.intake``, ``ingest.decode``.

``tests/unit/test_layers.py`` checks both.
"""
