"""The job's state: the state table (Delta), the ack journal, the checkpoint lock and owner, the source log.

May import: the ground (and no connector: state knows none).
Must not be imported by: the ground, ``sources``, ``sinks``.

``tests/unit/test_layers.py`` checks both.
"""
