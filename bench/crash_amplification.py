"""Benchmark: what a crash-looping job costs the run that recovers, against a clean drain of the same queue.

The scenario of issue 11: a fake queue of 20,000 events, a continuous job (visibility 5 s,
2 receivers, default caps) killed with ``kill -9`` at 20 random moments, then one drain run.
Prints the clean drain's time, the recovering drain's time, their ratio (held to ≤ 2), and the
recovering run's counters (duplicates, stale handles, failed deletes, batches), and checks the
books: every event in the sink exactly once, the queue empty.
``python bench/crash_amplification.py [--quick] [--events N] [--kills K] [--seed S]``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench.e2e_fake import job_cfg, seed
from sources.fake.store import FakeQueue
from tests.support.jobs import kill_while_running, start_cli

COUNTERS = ("duplicate_messages", "stale_handles", "failed_deletes", "batches", "received")


def config(root: Path, mode: str) -> Path:
    cfg = job_cfg(str(root), 2, 500, mode)
    cfg["sources"][0]["visibility_timeout"] = "5s"
    cfg["staging"] = {"dir": str(root / "staging")}  # the default caps
    cfg["metrics"] = {"file": str(root / "metrics.prom"), "print_batches": False}
    path = root / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def drain(path: Path) -> float:
    """Seconds a drain run takes, session start included; it must exit 0."""
    started = time.perf_counter()
    proc = start_cli(path, quiet=True)
    _, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err[-2000:]
    return time.perf_counter() - started


def counters(root: Path) -> dict[str, float]:
    lines = (root / "metrics.prom").read_text().splitlines()
    out = {}
    for name in COUNTERS:
        prefix = f"mq_ingest_{name}_total{{"
        out[name] = sum(float(x.rsplit(" ", 1)[1]) for x in lines if x.startswith(prefix))
    return out


def books(root: Path, queue: FakeQueue, n: int) -> None:
    import glob

    import orjson

    ids = []
    for f in glob.glob(str(root / "out" / "batch_id=*" / "part-*")):
        if os.path.exists(os.path.join(os.path.dirname(f), "_SUCCESS")):
            with open(f, "rb") as fh:
                ids += [orjson.loads(line)["event_id"] for line in fh if line.strip()]
    assert sorted(ids) == list(range(n)), f"{len(ids)} rows, {len(set(ids))} distinct, {n} sent"
    assert queue.count()["total"] == 0, queue.count()


def seeded(root: Path, n: int) -> FakeQueue:
    queue = FakeQueue(str(root / "q"), "in")
    seed(queue, n)
    return queue


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 events, 5 kills")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    n = args.events or (5_000 if args.quick else 20_000)
    kills = args.kills or (5 if args.quick else 20)
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="mq-bench-crash-"))

    clean_root = base / "clean"
    clean_q = seeded(clean_root, n)
    clean = drain(config(clean_root, "available_now"))
    books(clean_root, clean_q, n)
    print(f"clean drain of {n:,} events: {clean:.1f} s")

    root = base / "crashed"
    queue = seeded(root, n)
    continuous = config(root, "processing_time")
    for k in range(kills):
        kill_while_running(continuous, rng.uniform(4, 12), f"kill {k}")
    left = queue.count()
    while queue.count()["in_flight"]:
        time.sleep(0.2)  # the last run's leases run out, as before a scheduled run
    recovering = drain(config(root, "available_now"))
    books(root, queue, n)
    seen = counters(root)
    print(f"left after {kills} kills: {left}")
    print(f"drain after {kills} kills: {recovering:.1f} s")
    print(f"ratio: {recovering / clean:.2f}x (goal <= 2.00x)")
    print("recovering run: " + ", ".join(f"{k} {v:,.0f}" for k, v in seen.items()))
    print("books: every event in the sink exactly once, the queue empty")


if __name__ == "__main__":
    main()
