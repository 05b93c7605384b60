"""Freed heap memory goes back to the OS once a batch is acked; the streaming GC settings are undone."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref

import pytest

from ingest.runtime.memory import streaming_gc

FRAGMENTED = """
import json, threading, psutil
from ingest.runtime.memory import cap_arenas, release_free_memory
cap_arenas()  # as the CLI does first: the churn shares the driver's two arenas
rss = psutil.Process().memory_info().rss
def churn():
    # Many mid-sized blocks (glibc's heap, not pymalloc) from a thread, as a receiver's bodies
    # are; one in a hundred survives, so no arena can simply shrink.
    blocks = [bytes(2048) + bytes([i % 256]) for i in range(60_000)]
    return blocks[::100]
kept = []
worker = threading.Thread(target=lambda: kept.append(churn()))
worker.start()
worker.join()
before = psutil.Process().memory_info().rss
release_free_memory()
after = psutil.Process().memory_info().rss
print(json.dumps({"start": rss, "before": before, "after": after, "kept": len(kept[0])}))
"""


def test_a_freed_fragmented_heap_is_returned():
    """In a fresh interpreter: a pytest worker's heap holds free chunks of earlier tests, which
    the churn would reuse instead of growing the heap (a once-failure of the precondition)."""
    got = json.loads(_script(FRAGMENTED).stdout)
    assert got["before"] - got["start"] > 60 * 2**20, f"the churn did not grow the heap: {got}"
    assert got["before"] - got["after"] > 40 * 2**20, f"RSS {got['before'] >> 20} -> {got['after'] >> 20} MiB"
    assert got["kept"] == 600


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_streaming_gc_freezes_the_start_and_restores_the_collector_after_a_failure():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    made_before = [_Node() for _ in range(1000)]  # alive when streaming starts: frozen
    with pytest.raises(RuntimeError, match="batch failed"), streaming_gc(5_000):
        assert gc.get_threshold() == (5_000, 20, 20)
        assert gc.get_freeze_count() >= frozen + len(made_before)
        raise RuntimeError("batch failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_reference_cycles_made_while_streaming_are_still_collected():
    with streaming_gc(5_000):
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        churn = []
        for i in range(200_000):  # allocations: the young collections come round
            churn.append([i])
            if gone() is None:
                break
        assert gone() is None, "a cycle made while streaming was never collected"


def test_overlapping_jobs_restore_the_collector_only_when_the_last_one_ends():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    first, second = streaming_gc(5_000), streaming_gc(5_000)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first job ends while the second still streams
    assert gc.get_threshold() == (5_000, 20, 20) and gc.get_freeze_count() > frozen
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


ARENAS = """
import ctypes, sys, threading
from ingest.runtime.memory import cap_arenas
if sys.argv[1] == "cap":
    assert cap_arenas(2)
barrier = threading.Barrier(8)
def churn():
    barrier.wait()  # all at once, so they meet in malloc and glibc hands out more arenas
    for _ in range(200):
        blocks = [bytearray(4096) for _ in range(200)]
        del blocks
threads = [threading.Thread(target=churn) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" per arena, to stderr
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc arenas")
def test_capped_arenas_stay_at_two_where_threads_would_make_more():
    """The driver's receivers, stager, acker and Py4J threads would each get an arena (glibc:
    up to 8 a core) and keep its pages; capped, eight threads share two."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}

    def arenas(mode: str) -> int:
        return _script(ARENAS, mode, env=env).stderr.count("Arena ")

    assert arenas("cap") <= 2
    assert arenas("free") > 2, "eight threads made no more arenas: the cap was never tested"


def _script(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a heap and arenas no earlier test touched); it must exit 0."""
    run = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run
