"""The fake queue: a file-backed SQLite queue (``store``, ``db``) and its source (``source``)."""
