"""The sink contract suite's targets: one module per sink type, named after its ``type``, each with
``TARGETS`` (target name → factory), read through the test's clients, never the sink's code."""
