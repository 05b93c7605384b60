"""Build and operator tools: the spark-submit bundle, the class-archive builder, the fake-queue CLI.

May import: the ground, ``checkpoints``, every subpackage of ``ingest``, and (alone in
``ingest``) a connector's modules: the fake-queue command drives ``sources.fake``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``, ``ingest.runtime``,
``ingest.intake``, ``ingest.decode``, ``ingest.batch``, ``ingest.ops``.

``tests/unit/test_layers.py`` checks both.
"""
