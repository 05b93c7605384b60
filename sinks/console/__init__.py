"""The console sink: ``sink``, printing rows to standard output."""
