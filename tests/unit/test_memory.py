"""Freed heap memory goes back to the OS once a batch is acked; the streaming GC settings are undone."""

from __future__ import annotations

import gc
import threading
import weakref

import psutil
import pytest

from ingest.runtime.memory import release_free_memory, streaming_gc


def test_a_freed_fragmented_heap_is_returned():
    rss = psutil.Process().memory_info().rss

    def churn() -> list[bytes]:
        # Many mid-sized blocks (glibc's heap, not pymalloc) in a thread's own arena, as a
        # receiver's bodies are; one in a hundred survives, so no arena can simply shrink.
        blocks = [bytes(2048) + bytes([i % 256]) for i in range(60_000)]
        return blocks[::100]

    kept: list[list[bytes]] = []
    worker = threading.Thread(target=lambda: kept.append(churn()))
    worker.start()
    worker.join()
    before = psutil.Process().memory_info().rss
    release_free_memory()
    after = psutil.Process().memory_info().rss
    assert before - rss > 60 * 2**20, "the churn grew the heap"
    assert before - after > 40 * 2**20, f"RSS {before >> 20} -> {after >> 20} MiB"
    assert len(kept[0]) == 600


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
