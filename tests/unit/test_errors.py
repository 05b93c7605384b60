"""``describe``: one line for an error mq-ingest did not raise on purpose; ``call_with_retries``:
each retry logged, the tries counted in the final error, and a stop that ends the retries at once."""

from __future__ import annotations

import logging
import threading

import pytest

from ingest.errors import (
    FatalError,
    RetriesStopped,
    TransientError,
    call_with_retries,
    describe,
    redact,
    stop_retries_with,
)
from tests.support.polling import wait_for

WORKER_ERROR = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/x/worker.py", line 1, in main
    raise OSError("refused")
OSError: refused

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/claim_check.py", line 2, in attempt
    raise self._classify(err) from err
ingest.errors.TransientError: GetObject of object 'k' in bucket 'b': EndpointConnectionError: no
connection to "http://127.0.0.1:9/b/k"
"""


def test_an_error_from_a_python_worker_is_the_line_of_the_exception_it_raised():
    """Spark's first line says only that a worker raised: the exception's own line names the object."""
    assert describe(Exception(WORKER_ERROR)) == (
        "ingest.errors.TransientError: GetObject of object 'k' in bucket 'b': EndpointConnectionError: no"
    )


def test_other_errors_are_their_type_and_first_line():
    assert describe(ValueError("bad value\nmore")) == "ValueError: bad value"
    assert describe(Exception("An exception was thrown from the Python worker:")) == (
        "Exception: An exception was thrown from the Python worker:"
    )


def _refused(calls: list[int]):
    """A call that always fails for a transient reason, its message holding a secret; counts its calls."""

    def call() -> None:
        calls.append(1)
        raise TransientError("sinks.db.url: cannot write t: refused for user mq with pw-7f3e")

    return call


def test_each_retry_is_one_warning_line_and_the_final_error_says_how_many_tries(caplog):
    redact.add(["pw-7f3e"])
    calls: list[int] = []
    with caplog.at_level(logging.WARNING), pytest.raises(TransientError) as raised:
        call_with_retries(_refused(calls), what="sink db: write t", attempts=3, initial_wait=0.001)
    assert len(calls) == 3
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"retrying sink db: write t (attempt {n} of 3) after TransientError: sinks.db.url: cannot write t: "
        "refused for user mq with ***"
        for n in (2, 3)
    ]
    assert "pw-7f3e" not in caplog.text
    # The error as raised (the job's ``error:`` line masks it), with the tries counted.
    assert str(raised.value).endswith("refused for user mq with pw-7f3e (after 3 tries)")


def test_a_fatal_error_is_neither_retried_nor_logged(caplog):
    def fatal() -> None:
        raise FatalError("sinks.db.url: cannot write t: permission denied")

    with caplog.at_level(logging.WARNING), pytest.raises(FatalError, match=r"permission denied$"):
        call_with_retries(fatal, what="sink db: write t", attempts=3, initial_wait=0.001)
    assert not caplog.records


def test_a_stop_ends_the_wait_between_tries_at_once_and_no_try_follows():
    """100 tries 60 s apart: the stop, asked once the first try failed, ends them with
    ``RetriesStopped`` naming what was retried and the last error; no second try."""
    calls: list[int] = []
    stop = threading.Event()
    asker = threading.Thread(target=lambda: (wait_for(lambda: calls, 30, "the first try"), stop.set()))
    asker.start()
    try:
        with stop_retries_with(stop), pytest.raises(RetriesStopped) as raised:
            call_with_retries(_refused(calls), what="sink db: write t", attempts=100, initial_wait=60)
    finally:
        asker.join()
    assert len(calls) == 1
    assert str(raised.value) == (
        "retrying sink db: write t after 1 try: TransientError: sinks.db.url: cannot write t: "
        "refused for user mq with pw-7f3e"
    )


def test_a_stop_reaches_only_the_retries_inside_its_block():
    stop = threading.Event()
    stop.set()
    with stop_retries_with(stop):
        pass
    calls: list[int] = []
    with pytest.raises(TransientError, match=r"\(after 2 tries\)$"):
        call_with_retries(_refused(calls), what="sink db: write t", attempts=2, initial_wait=0.001)
    assert len(calls) == 2
