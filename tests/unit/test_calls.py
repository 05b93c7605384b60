"""The pool a source runs its chunked delete and visibility calls on."""

from __future__ import annotations

import doctest
import pickle
import threading

import pytest

from sources import calls
from sources.calls import CallPool


def test_docstring_example_runs():
    assert doctest.testmod(calls).failed == 0


def test_calls_run_side_by_side_and_results_keep_their_order():
    pool = CallPool("t", threads=3)
    together = threading.Barrier(3, timeout=5)  # breaks unless all three calls run at once

    def call(item: int) -> int:
        together.wait()
        return item * 10

    try:
        assert pool.map(call, [1, 2, 3]) == [10, 20, 30]
    finally:
        pool.close()


def test_an_error_is_raised_after_every_call_has_ended():
    pool = CallPool("t", threads=2)
    ended = []

    def call(item: int) -> None:
        if item == 0:
            raise RuntimeError("chunk 0 failed")
        threading.Event().wait(0.2)
        ended.append(item)

    with pytest.raises(RuntimeError, match="chunk 0 failed"):
        pool.map(call, [0, 1, 2])
    assert sorted(ended) == [1, 2]
    pool.close()


def test_one_thread_runs_in_the_caller_and_a_pickled_pool_has_no_threads():
    pool = CallPool("t", threads=1)
    assert (
        pool.map(lambda _: threading.current_thread().name, [1, 2]) == [threading.current_thread().name] * 2
    )
    many = CallPool("t", threads=4)
    many.map(str, [1, 2])
    copy = pickle.loads(pickle.dumps(many))
    assert copy.threads == 4 and copy._pool is None
    many.close()
