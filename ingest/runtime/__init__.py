"""The JVM and Spark session under a job: session settings, JIT, class archive, memory, console logging.

May import: the ground, ``checkpoints``.
Must not be imported by: the ground, ``sources``, ``sinks``, ``checkpoints``.

``tests/unit/test_layers.py`` checks both.
"""
