"""The JDBC table sink: ``sink`` (staging write, one commit), ``table`` (the driver's JDBC connection,
marker and commit), ``columns`` (type checks), ``errors`` (classification), ``config`` (its options)."""
