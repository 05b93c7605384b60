"""The fake-queue sink: ``sink``, sending rows to a file-backed fake queue."""
