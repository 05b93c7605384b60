"""The files sink: ``sink``, JSON-lines or Parquet files, one directory per batch."""
