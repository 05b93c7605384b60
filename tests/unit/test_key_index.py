"""The dedup window's compact key index: the same answers as a set of the keys."""

from __future__ import annotations

import doctest
import random

import numpy as np
import pyarrow as pa

from checkpoints import key_index
from checkpoints.key_index import KeyIndex, _Run


def test_docstring_example_runs():
    assert doctest.testmod(key_index).failed == 0


def test_answers_like_a_set_over_many_batches():
    rng = random.Random(7)
    index, reference = KeyIndex(), set()
    for batch in range(60):
        keys = list(dict.fromkeys(f"m-{rng.randrange(200_000)}" for _ in range(rng.randrange(1, 3_000))))
        probe = keys + [f"m-{rng.randrange(200_000)}" for _ in range(500)]
        assert index.contains(probe).tolist() == [k in reference for k in probe]
        new = [k for k in keys if k not in reference]
        index.add(new, seen_ms=batch)
        reference.update(new)
    assert len(index) == len(reference)
    assert index.runs <= 2 * int(np.log2(len(reference))), "runs are merged as they grow"


def test_arrow_arrays_and_python_lists_give_the_same_fingerprints():
    index = KeyIndex()
    index.add(pa.chunked_array([pa.array(["a"]), pa.array(["b"])]), seen_ms=1)
    index.add(pa.array(["c"], pa.large_string()), seen_ms=1)
    assert index.contains(["a", "b", "c", "d"]).tolist() == [True, True, True, False]
    assert index.contains(pa.array(["b", "d"])).tolist() == [True, False]
    assert index.contains([]).tolist() == []


def test_prune_forgets_only_keys_seen_before_the_cutoff():
    index = KeyIndex()
    index.add(["old-1", "old-2"], seen_ms=100)
    index.add(["new"], seen_ms=np.array([300]))
    index.add(["mixed-old", "mixed-new"], seen_ms=np.array([150, 250]))
    assert index.prune(cutoff_ms=200) == 3
    assert index.contains(["old-1", "old-2", "mixed-old", "new", "mixed-new"]).tolist() == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert len(index) == 2


def test_keys_sharing_the_high_half_are_told_apart_by_the_low_half():
    # Built by hand: real 64-bit collisions are too rare to find in a test.
    run = _Run(
        np.array([5, 5, 5, 9], dtype=np.uint64),
        np.array([1, 2, 3, 1], dtype=np.uint64),
        np.zeros(4, dtype=np.int64),
    )
    hi = np.array([5, 5, 5, 7, 9, 9], dtype=np.uint64)  # sorted, as KeyIndex passes them
    lo = np.array([3, 4, 1, 1, 1, 2], dtype=np.uint64)
    assert run.contains(hi, lo).tolist() == [True, False, True, False, True, False]


def test_a_million_keys_take_about_24_bytes_each():
    index = KeyIndex()
    n = 1_000_000
    index.add(pa.array([f"{i:032x}" for i in range(n)]), seen_ms=0)
    held = sum(r.hi.nbytes + r.lo.nbytes + r.seen.nbytes for r in index._runs)
    assert held == 24 * n
    assert index.contains(["00000000000000000000000000000010", "nope"]).tolist() == [True, False]
