"""Benchmark: the state table's unseen(), commit(), open() and maintain() at 100k and 1M keys.

Prints best/median times and ratios against baselines run in the same process: unseen() vs a
plain Python dict-lookup loop and vs ``pyarrow.compute.is_in`` against an Arrow index (the
alternative index design); commit() vs a plain delta-rs append; open() vs reading its columns.
Run: ``python bench/state_table.py [--keys 1000000] [--batch 50000]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from checkpoints.state import SCHEMA, StateTable

MINUTE_MS = 60_000


def ids(n: int) -> list[str]:
    """``n`` random 32-hex-digit ids, like MNS/SQS message ids."""
    raw = os.urandom(16 * n).hex()
    return [raw[i : i + 32] for i in range(0, 32 * n, 32)]


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    """Best and median wall time of ``fn()`` in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def build(path: Path, n: int, now: int, parts: int = 10) -> tuple[StateTable, list[str]]:
    """A table of ``n`` keys in ``parts`` commits, seen 50..5 minutes before ``now``."""
    st = StateTable(str(path), "bench", 3600)
    st.open()
    keys = ids(n)
    step = n // parts
    for i in range(parts):
        st.commit(i, keys[i * step : (i + 1) * step], now_ms=now - (50 - 5 * i) * MINUTE_MS)
    return st, keys


def bench_unseen(st: StateTable, indexed: list[str], batch: int, label: str) -> None:
    half = batch // 2
    query = pa.chunked_array([pa.array(indexed[:half] + ids(batch - half))])
    as_list = query.to_pylist()
    index = dict.fromkeys(indexed)  # the design KeyIndex replaced: a dict of the keys
    arrow_index = pa.array(indexed)
    best, med = timed(lambda: st.unseen(query))
    base, _ = timed(lambda: [k not in index for k in as_list])
    isin, _ = timed(lambda: pc.invert(pc.is_in(query, value_set=arrow_index)), repeat=3)
    assert st.unseen(query).equals(pc.invert(pc.is_in(query, value_set=arrow_index)).combine_chunks())
    print(f"unseen({batch:,}) vs {label} index: best {ms(best)}  median {ms(med)}")
    print(f"    dict-lookup loop on a list (baseline): {ms(base)}  → unseen/baseline = {best / base:.2f}")
    print(f"    pc.is_in against an Arrow index:      {ms(isin)}  → is_in/unseen = {isin / best:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000, help="size of the large table")
    parser.add_argument("--small", type=int, default=100_000, help="size of the small table")
    parser.add_argument("--batch", type=int, default=50_000, help="keys per unseen() call")
    parser.add_argument("--commit", type=int, default=10_000, help="new keys per commit()")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-state-"))
    now = int(time.time() * 1000)
    try:
        started = time.perf_counter()
        small, small_keys = build(work / "small", args.small, now)
        print(f"setup: {args.small:,}-key table built in {time.perf_counter() - started:.1f} s")
        bench_unseen(small, small_keys, args.batch, f"{args.small:,}")
        small.close()

        rss0 = rss_mb()
        started = time.perf_counter()
        big, big_keys = build(work / "big", args.keys, now)
        print(f"setup: {args.keys:,}-key table built in {time.perf_counter() - started:.1f} s")
        print(f"    index RSS ≈ {rss_mb() - rss0:.0f} MiB (the index + the bench's key list)")
        bench_unseen(big, big_keys, args.batch, f"{args.keys:,}")

        batch_id = big.committed_batch()
        fresh = [ids(args.commit) for _ in range(15)]

        def commit_new() -> None:
            nonlocal batch_id
            batch_id += 1
            assert big.commit(batch_id, fresh.pop(), now_ms=now)

        best, med = timed(commit_new)
        raw = pa.table(
            {"key": ids(args.commit), "batch_id": [0] * args.commit, "seen_ms": [now] * args.commit}
        )
        DeltaTable.create(str(work / "raw"), SCHEMA)
        base, _ = timed(lambda: write_deltalake(str(work / "raw"), raw.cast(SCHEMA), mode="append"))
        print(f"commit({args.commit:,} new keys) into {args.keys:,}: best {ms(best)}  median {ms(med)}")
        print(
            f"    plain write_deltalake append (baseline):  {ms(base)}  → commit/baseline = {best / base:.2f}"
        )
        batch_id += 1
        best, _ = timed(lambda: big.commit(batch_id, [], now_ms=now), repeat=1)
        print(f"commit(empty) into {args.keys:,}:                best {ms(best)}")

        reopened = StateTable(str(work / "big"), "bench", 3600)
        best, med = timed(reopened.open, repeat=3)
        indexed = len(reopened._opened_index())
        scan = DeltaTable(str(work / "big")).to_pyarrow_dataset()
        base, _ = timed(lambda: scan.to_table(columns=["key", "seen_ms"]), repeat=3)
        print(f"open() of {big.count():,} rows (index of {indexed:,}): best {ms(best)}  median {ms(med)}")
        print(
            f"    read key+seen_ms to Arrow (baseline):     {ms(base)}  → open/baseline = {best / base:.1f}"
        )
        reopened.close()

        for label, at in (
            ("1st, nothing expires", now + 10 * MINUTE_MS),
            ("2nd, 100k rows expire", now + 15 * MINUTE_MS),
        ):
            for _ in range(5):
                commit_new()  # small files for compaction to merge
            started = time.perf_counter()
            counts = big.maintain(now_ms=at)
            print(f"maintain() {label}: {ms(time.perf_counter() - started)}  {counts}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
