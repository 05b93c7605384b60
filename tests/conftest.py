"""Shared pytest fixtures: one local SparkSession per test session, free ports."""

from __future__ import annotations

import os
import socket
import sys

import pytest

# Spark's Python workers must use this interpreter (the venv), not whatever python3 is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by the whole test session (cold start is ~10 s)."""
    from ingest.spark import make_session

    session = make_session(master="local[2]", app_name="mq-ingest-tests", conf={}, log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
