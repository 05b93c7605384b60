"""An mq-ingest plugin: a counter source and a JSON-lines sink, found by their entry points."""
