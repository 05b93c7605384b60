"""The Delta Lake sink: ``sink`` (the sink), ``files`` (the executors' data files), ``table``
(the driver's commits and maintenance), ``config`` (its options)."""
