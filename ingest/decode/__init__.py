"""From staged bodies to rows: text and binary formats, Avro schemas, OSS events, claim-check payloads.

May import: the ground, ``checkpoints``, ``ingest.runtime``, ``ingest.intake``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``,
``ingest.intake``.

``tests/unit/test_layers.py`` checks both.
"""
