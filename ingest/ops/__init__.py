"""Watching a job: health, queue depths, the drain rule, the run's summary, job events and their delivery.

May import: the ground, ``checkpoints``, ``ingest.runtime``, ``ingest.intake``, ``ingest.decode``,
``ingest.batch``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``,
``ingest.intake``, ``ingest.decode``, ``ingest.batch``.

``tests/unit/test_layers.py`` checks both.
"""
