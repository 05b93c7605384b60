"""Receiving: receiver threads, sources in child processes, the start-up probe, leases, the stager
and its files, the envelope, the acker, recovery.

May import: the ground, ``checkpoints``, ``ingest.runtime``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``.

``tests/unit/test_layers.py`` checks both.
"""
