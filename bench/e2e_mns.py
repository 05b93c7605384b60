"""Benchmark: MNS → Spark → files through the exactly-once path on the MNS emulator, vs a raw SDK loop.

Runs the emulator as its own process (``python -m tests.emulators.mns``) and prints, in one run:
msgs/s of a raw aliyun-mns-sdk ``batch_receive_message(16)`` + ``batch_delete_message`` loop (on
one thread, and on ``--threads`` threads with one Account each), of MnsSource's receive+ack loop
with the same threads, and of the pipeline (available_now, session start included, and
``sustained``: a continuous run from its first to its last commit, with an in-flight window of a
quarter of the run); their ratios;
p50/p99 enqueue→sink latency with a paced producer and a continuous trigger; peak RSS.
Compare only the ratios.
``python bench/e2e_mns.py [--messages N] [--sustained N] [--threads T] [--rate R]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


from bench.continuous import phase_table, sustained
from bench.e2e_fake import SCHEMA, STAGING, RssSampler, body, sink_latency, tree_cpu, tree_rss
from ingest.batch.info import BatchInfo
from ingest.config import parse_config
from ingest.pipeline import Job
from sources.mns.source import MnsSource
from tests.support.jobconfig import job_config
from tests.support.mns_server import AK_ID, AK_SECRET, account, create_queue, send_bodies, source_cfg


def seed(url: str, queue: str, n: int, threads: int = 4) -> None:
    """Put ``n`` ~300-byte JSON bodies on ``queue`` (base64, 16 per call, a few sender threads)."""
    parts = [range(k, n, threads) for k in range(threads)]
    workers = [
        threading.Thread(target=send_bodies, args=(url, queue, [body(i)["body"] for i in part]))
        for part in parts
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def timed_drain(n: int, threads: int, make_loop: Callable[[], Callable[[], int]]) -> float:
    """msgs/s of ``threads`` threads each running ``make_loop()`` (returns msgs handled, 0 when empty)."""
    done = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal done
        step = make_loop()
        while (k := step()) > 0:
            with lock:
                done += k

    t0 = time.perf_counter()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert done >= n, (done, n)
    return n / (time.perf_counter() - t0)


def raw_loop(url: str, queue: str) -> Callable[[], int]:
    """One thread's raw SDK loop: receive(16) with a 1 s long poll, then delete the batch."""
    from mns.mns_exception import MNSServerException

    q = account(url).get_queue(queue)
    q.set_encoding(False)

    def step() -> int:
        try:
            msgs = q.batch_receive_message(16, 1)
        except MNSServerException as err:
            if err.type == "MessageNotExist":
                return 0
            raise
        q.batch_delete_message([m.receipt_handle for m in msgs])
        return len(msgs)

    return step


def job_cfg(root: str, url: str, queue: str, threads: int, mode: str) -> dict:
    """The benchmark's job: MNS queue ``queue`` at ``url`` into JSON-lines files, in ``mode``."""
    src = {"type": "mns", "name": "src", "endpoint": url, "queueName": queue, "accessKeyId": AK_ID}
    src |= {"accessKeySecret": AK_SECRET, "batchSize": 16, "pollingWaitTime": "1s", "receivers": threads}
    return job_config(
        src | {"format": "json", "visibility_timeout": "60s", "on_bad_message": "skip"},  # as e2e_fake
        root,
        name="bench-mns",
        schema=SCHEMA,
        staging=STAGING,
        trigger={"mode": mode, "interval": "500ms", "idle_rounds": 1},
        metrics={"print_batches": False},
    )


def latency(root: str, url: str, rate: int, seconds: float, threads: int) -> tuple[float, float]:
    """p50/p99 ms from MNS EnqueueTime to the end of the batch that wrote the row, at ``rate`` msgs/s."""
    queue = create_queue(url, visibility_timeout=60)
    job = Job(parse_config(job_cfg(root, url, queue, threads, "processing_time")), echo=lambda s: None)
    done_at: dict[int, float] = {}
    original = job._batch_done

    def record(batch_id: int, info: BatchInfo) -> None:
        done_at[batch_id] = time.time() * 1000
        original(batch_id, info)

    job._batch_done = record
    runner = threading.Thread(target=job.run)
    runner.start()
    time.sleep(8)  # let the session and the query start
    total, chunk = int(rate * seconds), 16
    t0 = time.perf_counter()
    for k in range(0, total, chunk):
        send_bodies(url, queue, [body(i)["body"] for i in range(k, min(total, k + chunk))])
        time.sleep(max(0.0, t0 + (k + chunk) / rate - time.perf_counter()))
    deadline = time.time() + 60
    while job.metrics.total("written") < total and time.time() < deadline:
        time.sleep(0.1)
    job.stop()
    runner.join()
    return sink_latency(f"{root}/out", done_at, "enqueue_ts")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--sustained", type=int, default=60_000, help="continuous run size")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rate", type=int, default=1000, help="msgs/s for the latency run")
    args = ap.parse_args()
    n, t = args.messages, args.threads
    cmd = [
        sys.executable,
        "-m",
        "tests.emulators.mns",
        "--access-key-id",
        AK_ID,
        "--access-key-secret",
        AK_SECRET,
    ]
    root_dir = Path(__file__).resolve().parents[1]  # the emulator is test code, importable from there
    emulator = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=root_dir)
    url = emulator.stdout.readline().strip()
    root = tempfile.mkdtemp(prefix="mq-bench-mns-")
    sampler = RssSampler()
    sampler.start()
    try:
        rates = {}
        for threads in sorted({1, t}):
            queue = create_queue(url, visibility_timeout=60)
            seed(url, queue, n)
            rates[threads] = timed_drain(n, threads, lambda q=queue: raw_loop(url, q))
            print(f"raw SDK receive(16)+delete loop: {rates[threads]:,.0f} msgs/s ({threads} thread(s))")
        raw = rates[t]
        queue = create_queue(url, visibility_timeout=60)
        seed(url, queue, n)
        source = MnsSource(source_cfg(url, queue, visibility_timeout=60))

        def source_loop() -> Callable[[], int]:
            return lambda: len(source.ack([m.receipt_handle for m in source.receive(16, 1)]).deleted)

        loop = timed_drain(n, t, source_loop)
        source.close()
        print(f"MnsSource receive+ack loop: {loop:,.0f} msgs/s ({t} threads), ratio to raw {loop / raw:.2f}x")
        queue = create_queue(url, visibility_timeout=60)
        seed(url, queue, n)
        job = Job(parse_config(job_cfg(f"{root}/e2e", url, queue, t, "available_now")), echo=lambda s: None)
        t0 = time.perf_counter()
        assert job.run() == 0
        elapsed = time.perf_counter() - t0
        s = job.metrics.summary()
        assert s["written"] == n and s["deletedMessages"] == n + s["duplicateMessages"], s
        what = f"{n:,} msgs in {elapsed:.1f}s, session start included"
        print(f"MNS → Spark → files pipeline: {n / elapsed:,.0f} msgs/s ({what})")
        print(f"ratio drain/raw: {n / elapsed / raw:.2f}x")
        queue = create_queue(url, visibility_timeout=60)
        cfg = job_cfg(f"{root}/steady", url, queue, t, "processing_time")
        # A window of a quarter of the run: receivers cannot stage it before the clock starts, and
        # the window (messages in flight from receive to delete, about 2 s) does not cap the rate.
        m = args.sustained
        cfg["staging"]["max_in_flight"] = max(1000, m // 4)
        steady = sustained(m, cfg, lambda: seed(url, queue, m), tree_cpu, tree_rss)
        print(steady.line())
        print(f"ratio pipeline/raw: {steady.rate / raw:.2f}x")
        print(phase_table(steady))
        p50, p99 = latency(f"{root}/lat", url, args.rate, 10, t)
        print(f"enqueue→sink latency at {args.rate} msgs/s: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
        print(f"peak RSS (Python + JVM + emulator): {sampler.peak / 2**20:,.0f} MiB")
    finally:
        sampler.stopping.set()
        emulator.terminate()
        emulator.wait(timeout=10)


if __name__ == "__main__":
    main()
