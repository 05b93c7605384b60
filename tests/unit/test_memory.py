"""Freed heap memory goes back to the OS once a batch is acked."""

from __future__ import annotations

import threading

import psutil

from ingest.memory import release_free_memory


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
