"""Benchmark: a long continuous job on the fake queue; the driver's RSS at every 10% and its growth.

The job of ``bench/e2e_fake.py`` (fake queue → files sink, JSON lines, 500 ms trigger) runs until
``--messages`` (10M) are written or ``--minutes`` (30) have passed, whichever comes first; a
producer in a process of its own (not counted in the driver's memory) keeps ``--backlog``
messages waiting on the queue. From the first commit on, at each tenth of the run (of the messages
or of the time, whichever is further along), it prints the peak RSS of that tenth, split into the
Python driver, the JVM and the Python workers (``bench.memory``), the tenth's own rate and the
driver's CPU a message in it (Python, JVM and workers; the producer left out), so a job whose
cost per message rises with its age shows, and at the end the growth from the second tenth to
the last (the first holds the JIT's warm-up). The state table's index of seen
keys grows by 24 bytes a message for the dedup window (7 days by default; ``--dedup-window``):
each tenth prints its size. Over ``--limit`` percent (10) it prints
``MEMORY GROWTH OVER LIMIT`` and exits 1. The files sink's output stays on disk until the end:
about 5 GB for 10M messages, under the system's temp dir.
Run: ``python bench/soak.py`` (``make bench-soak``); a smoke run: ``--messages 50000 --minutes 1``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench.e2e_fake import body, job_cfg
from bench.memory import FILES_BUDGET, MIB, RssSampler, Window, tree_cpu
from ingest.config import parse_config
from ingest.pipeline import Job
from ingest.runtime.memory import cap_arenas
from sources.fake.store import FakeQueue

START_TIMEOUT = 600.0
"""Seconds the job may take to commit its first batch (the session start; a loaded machine is slow)."""
KEY_BYTES = 24
"""The state table's index holds a key in 24 bytes (``checkpoints.key_index``)."""
CHUNK = 1000
"""Messages a ``send_batch`` of the producer."""


def produce(path: str, total: int, backlog: int) -> None:
    """Send ``total`` messages to ``path``'s queue ``in``, keeping at most about ``backlog`` on it."""
    q = FakeQueue(path, "in")
    q.create()
    sent = 0
    while sent < total:
        if q.count()["total"] >= backlog:
            time.sleep(0.1)
            continue
        for start in range(sent, min(total, sent + 10 * CHUNK), CHUNK):
            q.send_batch([body(i) for i in range(start, min(total, start + CHUNK))])
        sent = min(total, sent + 10 * CHUNK)


def soak(root: str, n: int, seconds: float, backlog: int, cfg: dict) -> list[Window]:
    """Run the job ``cfg`` until ``n`` messages are written or ``seconds`` have passed; a window per tenth."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--produce", f"{root}/q", str(n), str(backlog)]
    producer = subprocess.Popen(cmd)
    sampler = RssSampler()
    sampler.start()
    job = Job(parse_config(cfg), echo=print)
    runner = threading.Thread(target=job.run, name="soak-job")
    started = time.monotonic()
    runner.start()
    windows = []
    try:
        with sampler.run_window("session start and first batch", FILES_BUDGET):
            while job.metrics.total("written") == 0:
                _check(runner, producer, started + START_TIMEOUT)
                time.sleep(0.1)
        t0, w0 = time.monotonic(), int(job.metrics.total("written"))
        last_t, last_w, last_cpu = t0, w0, tree_cpu(leave_out=producer.pid)
        print(f"first commit after {t0 - started:.0f} s, {w0:,} msgs; the tenths count from here")
        for tenth in range(1, 11):
            with sampler.run_window(f"{tenth * 10}%", FILES_BUDGET, echo=lambda s: None) as window:
                while (written := int(job.metrics.total("written"))) < w0 + (n - w0) * tenth / 10:
                    if time.monotonic() - t0 >= seconds * tenth / 10:
                        break
                    _check(runner, producer, float("inf"))
                    time.sleep(0.5)
            windows.append(window)
            now, cpu = time.monotonic(), tree_cpu(leave_out=producer.pid)
            elapsed, n_tenth = now - t0, written - last_w
            rate = f"{(written - w0) / elapsed:,.0f} msgs/s; this tenth {n_tenth / (now - last_t):,.0f}"
            per = f"driver CPU {(cpu - last_cpu) * 1e6 / n_tenth:,.0f} us/msg" if n_tenth else "none written"
            print(f"{tenth * 10:>3}%: {written:>11,} msgs in {elapsed:6,.0f} s ({rate}, {per})")
            print(f"      peak RSS {window.peak}")
            last_t, last_w, last_cpu = now, written, cpu
            print(f"      {_index(job)}")
            if window.over:
                print(window.line())
    finally:
        job.stop()
        runner.join()
        sampler.stopping.set()
        if producer.poll() is None:
            producer.terminate()
        producer.wait()
    print(sampler.cost())
    return windows


def _index(job: Job) -> str:
    """The state table's in-memory index of seen keys: it holds every key of the dedup window."""
    state = getattr(getattr(job, "handler", None), "state", None)  # the job keeps it in its handler
    index = getattr(state, "_index", None)
    keys = len(index) if index is not None else 0
    return f"dedup index: {keys:,} keys, ~{keys * KEY_BYTES / MIB:,.0f} MiB of the driver's RSS"


def _check(runner: threading.Thread, producer: subprocess.Popen, deadline: float) -> None:
    if not runner.is_alive():
        raise RuntimeError("the job stopped before the soak's end")
    if producer.poll() not in (None, 0):
        raise RuntimeError(f"the producer failed (exit code {producer.returncode})")
    if time.monotonic() > deadline:
        raise TimeoutError(f"no batch committed in {START_TIMEOUT:.0f} s")


def main() -> int:
    cap_arenas()  # as the CLI does, before this process's threads start
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=10_000_000, help="stop once this many are written")
    ap.add_argument("--minutes", type=float, default=30.0, help="or once this long has passed")
    ap.add_argument("--backlog", type=int, default=200_000, help="messages kept waiting on the queue")
    ap.add_argument("--limit", type=float, default=10.0, help="allowed RSS growth, second tenth to last (%%)")
    ap.add_argument(
        "--dedup-window", type=float, help="state.dedup_window in seconds (default the job's, 7 days)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--produce", nargs=3, metavar=("PATH", "TOTAL", "BACKLOG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.produce:
        produce(args.produce[0], int(args.produce[1]), int(args.produce[2]))
        return 0
    root = tempfile.mkdtemp(prefix="mq-bench-soak-")
    print(f"soak: {args.messages:,} messages or {args.minutes:g} min, a backlog of {args.backlog:,}")
    try:
        cfg = job_cfg(root, args.threads, args.batch, "processing_time")
        if args.dedup_window is not None:
            cfg["state"]["dedup_window"] = args.dedup_window
        windows = soak(root, args.messages, args.minutes * 60, args.backlog, cfg)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    second, last = windows[1].peak, windows[-1].peak
    growth = (last.total - second.total) / second.total * 100
    print(f"RSS growth from the second 10% to the last: {last.growth(second)}")
    if growth > args.limit:
        print(f"MEMORY GROWTH OVER LIMIT: {growth:+.1f}% > {args.limit:g}% ({second} -> {last})")
        return 1
    print(f"memory growth within the limit: {growth:+.1f}% <= {args.limit:g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
