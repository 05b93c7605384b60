"""``describe``: one line for an error mq-ingest did not raise on purpose."""

from __future__ import annotations

from ingest.errors import describe

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
