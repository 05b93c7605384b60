"""Benchmark: the exactly-once path on the fake queue into the files sink, against two baselines.

One process, one run: the raw fake-queue receive+delete loop; a drain (``available_now``) of
``--messages`` with the session start; Spark's floor (``bench/floor.py``) on the same staged
envelopes; a continuous run (``processing_time``, 500 ms) of ``--continuous`` messages, whose
rate from the first to the last commit is the ``sustained`` figure, with the driver's CPU per
message, RSS and a per-phase table; enqueue→sink latency with a paced producer; the same
continuous run into the files sink (Parquet), where PostgreSQL is installed the JDBC sink (exactly
once, the table's rows counted after) and the Delta sink, ``sustained`` and CPU per message for
each. Every run prints its peak RSS against its budget (``bench/memory.py``). The Delta run comes
last: the Python workers its writes start stay (``spark.python.worker.reuse``), and a run after it
would carry their memory. Run: ``python bench/e2e_fake.py [--quick]`` (``make bench``);
``--only-sinks`` runs just the sink comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import orjson

from bench.continuous import phase_table, sustained
from bench.memory import DELTA_BUDGET, FILES_BUDGET, RAW_BUDGET, RssSampler, tree_cpu
from ingest.batch.info import BatchInfo
from ingest.config import parse_config
from ingest.pipeline import Job
from ingest.runtime.memory import cap_arenas
from sources.fake.store import FakeQueue
from tests.support import postgres
from tests.support.jobconfig import job_config

SCHEMA = "event_id BIGINT, user_id BIGINT, action STRING, amount DOUBLE, ts TIMESTAMP, payload STRING"
STAGING = {"roll_messages": 5000, "roll_interval": "250ms"}
"""Staged files of the benchmarks' jobs: 5,000 messages or 250 ms each."""


def body(i: int) -> dict:
    pad = "x" * 180  # ~300 B JSON bodies
    return {
        "body": orjson.dumps(
            {
                "event_id": i,
                "user_id": i % 1000,
                "action": "purchase",
                "amount": i * 0.01,
                "ts": "2026-11-22T10:00:00.000Z",
                "payload": pad,
            }
        ).decode()
    }


def seed(q: FakeQueue, n: int) -> None:
    for start in range(0, n, 1000):
        q.send_batch([body(i) for i in range(start, min(n, start + 1000))])


def raw_loop(path: str, n: int, threads: int, batch: int) -> float:
    q = FakeQueue(path, "raw")
    seed(q, n)
    done = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal done
        while True:
            msgs = q.receive(batch, 0.2, 30)
            if not msgs:
                return
            q.delete([m.receipt_handle for m in msgs])
            with lock:
                done += len(msgs)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    assert done == n, (done, n)
    return n / elapsed


def job_cfg(root: str, threads: int, batch: int, mode: str, sink: dict | None = None) -> dict:
    """The benchmark's job: the fake queue ``root/q`` into JSON-lines files (or ``sink``), in ``mode``."""
    source = {"type": "fake", "name": "src", "path": f"{root}/q", "queue": "in", "receivers": threads}
    # skip, as the figures in docs/performance.md were measured: one sink and no fail policy write a batch
    # in one Spark job (the bodies are all valid; fail, the default, scans each batch first).
    source |= {"batch_size": batch, "wait_time": "200ms", "format": "json", "on_bad_message": "skip"}
    return job_config(
        source,
        root,
        None if sink is None else [sink],
        name="bench",
        schema=SCHEMA,
        staging={**STAGING, "max_files_per_trigger": 1000},
        trigger={"mode": mode, "interval": "500ms", "idle_rounds": 1},
        metrics={"print_batches": False},
        # Every run shares the process's one session, which the first run starts: it takes the JDBC
        # sink's driver then (a running session's jars cannot change).
        spark={"conf": {"spark.jars": jar} if (jar := postgres.jdbc_jar()) else {}},
    )


def pipeline(root: str, n: int, threads: int, batch: int) -> tuple[float, float]:
    q = FakeQueue(f"{root}/q", "in")
    seed(q, n)
    job = Job(parse_config(job_cfg(root, threads, batch, "available_now")), echo=lambda s: None)
    t0 = time.perf_counter()
    assert job.run() == 0
    elapsed = time.perf_counter() - t0
    s = job.metrics.summary()
    assert s["written"] == n and s["deletedMessages"] == n and q.count()["total"] == 0, s
    return n / elapsed, elapsed


def latency(root: str, rate: int, seconds: float, threads: int, batch: int) -> tuple[float, float]:
    q = FakeQueue(f"{root}/q", "in")
    job = Job(parse_config(job_cfg(root, threads, batch, "processing_time")), echo=lambda s: None)
    done_at: dict[int, float] = {}
    original = job._batch_done

    def record(batch_id: int, info: BatchInfo) -> None:
        done_at[batch_id] = time.time() * 1000
        original(batch_id, info)

    job._batch_done = record
    runner = threading.Thread(target=job.run)
    runner.start()
    time.sleep(8)  # let the session and query start
    total = int(rate * seconds)
    t0 = time.perf_counter()
    for k in range(0, total, max(1, rate // 20)):
        q.send_batch([body(i) for i in range(k, min(total, k + max(1, rate // 20)))])
        time.sleep(max(0.0, t0 + (k + rate // 20) / rate - time.perf_counter()))
    deadline = time.time() + 60
    while job.metrics.total("written") < total and time.time() < deadline:
        time.sleep(0.1)
    job.stop()
    runner.join()
    return sink_latency(f"{root}/out", done_at, "sent_ts")


def sink_latency(out: str, done_at: dict[int, float], field: str) -> tuple[float, float]:
    """p50 and p99 in ms of (batch done − ``_meta.<field>``) over every row the files sink wrote."""
    lat = []
    for d in glob.glob(f"{out}/batch_id=*"):
        b = int(d.rsplit("=", 1)[1])
        for f in glob.glob(f"{d}/part-*"):
            with open(f, "rb") as fh:
                lat += [done_at[b] - orjson.loads(line)["_meta"][field] for line in fh]
    lat.sort()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def sink_comparison(root: str, n: int, threads: int, batch: int, sampler: RssSampler) -> None:
    """The same continuous run into the files sink (Parquet), where PostgreSQL's server is installed
    (``make postgres``) the JDBC sink on a local PostgreSQL, and the Delta sink, one after the other."""
    budgets = {"delta": DELTA_BUDGET}  # the others' writes run in the JVM, as the files sink's
    sinks: dict[str, dict] = {  # title → the sink; each run's queue and state under root/<type>
        "files sink (parquet)": {"type": "files", "path": f"{root}/files/out", "format": "parquet"},
    }
    with contextlib.ExitStack() as stack:
        pg = stack.enter_context(postgres.running()) if postgres.bin_dir() else None
        if pg is not None:
            database = pg.create_database()
            sinks["jdbc sink (postgresql)"] = {
                "type": "jdbc",
                "url": pg.jdbc_url(database),
                "table": "events",
            }
            sinks["jdbc sink (postgresql)"] |= {
                "user": pg.user,
                "password": pg.password,
                "create_table": True,
            }
        else:
            print("jdbc sink: skipped, no PostgreSQL server here (make postgres)")
        sinks["delta sink"] = {"type": "delta", "path": f"{root}/delta/out"}  # last: see the module's doc
        runs = {}
        for title, sink in sinks.items():
            cfg = job_cfg(
                f"{root}/{sink['type']}", threads, batch, "processing_time", {"name": "out", **sink}
            )
            queue = FakeQueue(f"{root}/{sink['type']}/q", "in")
            with sampler.run_window(title, budgets.get(sink["type"], FILES_BUDGET)):
                run = runs[title] = sustained(n, cfg, lambda q=queue: seed(q, n), tree_cpu, sampler.latest)
                print(f"{title}: {run.line()}; {run.cpu_line()}")
        files = runs["files sink (parquet)"].rate or float("nan")  # nan: a run the first batch took whole
        print(f"ratio delta/files (parquet): {runs['delta sink'].rate / files:.2f}x sustained")
        if pg is not None:
            with pg.connect(database) as conn:
                rows, ids = conn.execute("SELECT count(*), count(DISTINCT event_id) FROM events").fetchone()
            assert rows == ids == n, f"the JDBC table holds {rows} rows, {ids} distinct, of {n}"
            ratio = runs["jdbc sink (postgresql)"].rate / files
            print(f"ratio jdbc/files (parquet): {ratio:.2f}x sustained (the table: {rows:,} rows, each once)")


def main() -> None:
    cap_arenas()  # as the CLI does, before this process's threads start
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20k drain, 300k continuous, 5 s paced")
    ap.add_argument("--messages", type=int, default=None, help="drain run size (default 200,000)")
    ap.add_argument("--continuous", type=int, default=None, help="continuous run size (default 1,000,000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rate", type=int, default=10_000, help="msgs/s for the latency run")
    ap.add_argument("--only-sinks", action="store_true", help="only the files (parquet) vs Delta sink runs")
    ap.add_argument("--batch-messages", type=int, default=None, help="staging.batch_messages (1: no gate)")
    args = ap.parse_args()
    if args.batch_messages is not None:
        STAGING["batch_messages"] = args.batch_messages
    drain_n = args.messages or (20_000 if args.quick else 200_000)
    # Over the 100k in-flight cap, or the first batch takes the whole run and nothing is "sustained".
    cont_n = args.continuous or (300_000 if args.quick else 1_000_000)
    paced_s = 5 if args.quick else 10
    root = tempfile.mkdtemp(prefix="mq-bench-")
    sampler = RssSampler()
    sampler.start()
    try:
        if args.only_sinks:
            sink_comparison(f"{root}/sinks", cont_n, args.threads, args.batch, sampler)
            return
        with sampler.run_window("raw loop (no Spark)", RAW_BUDGET):
            raw = raw_loop(f"{root}/raw", drain_n, args.threads, args.batch)
            print(f"raw receive+delete loop: {raw:,.0f} msgs/s ({args.threads} threads, batch {args.batch})")
        with sampler.run_window("drain (files sink, JSON; the session starts)", FILES_BUDGET):
            rate, elapsed = pipeline(f"{root}/e2e", drain_n, args.threads, args.batch)
            print(
                f"exactly-once pipeline: {rate:,.0f} msgs/s (drain of {drain_n:,} msgs in {elapsed:.1f}s, "
                "session start included)"
            )
        from pyspark.sql import SparkSession

        from bench.floor import floor_rate

        spark = SparkSession.getActiveSession()
        with sampler.run_window("Spark floor (no mq-ingest)", FILES_BUDGET):
            floor = floor_rate(spark, f"{root}/floor", drain_n, SCHEMA, body, 1000)
            print(f"Spark floor (file source → from_json → JSON files, warm JVM): {floor:,.0f} rows/s")
        cfg = job_cfg(f"{root}/cont", args.threads, args.batch, "processing_time")
        queue = FakeQueue(f"{root}/cont/q", "in")
        with sampler.run_window("continuous (files sink, JSON)", FILES_BUDGET):
            run = sustained(cont_n, cfg, lambda: seed(queue, cont_n), tree_cpu, sampler.latest)
            print(run.line())
            print(f"ratio pipeline/raw: {run.rate / raw:.2f}x")
            print(f"ratio pipeline/floor: {run.rate / floor:.2f}x")
            print(run.cpu_line())
            print(
                f"RSS while writing the first 10%: {run.rss_first / 2**20:,.0f} MiB, "
                f"the last 10%: {run.rss_last / 2**20:,.0f} MiB"
            )
            print(phase_table(run))
        with sampler.run_window(f"latency run (files sink, JSON, {args.rate:,} msgs/s)", FILES_BUDGET):
            p50, p99 = latency(f"{root}/lat", args.rate, paced_s, args.threads, args.batch)
            print(f"enqueue→sink latency at {args.rate} msgs/s: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
        sink_comparison(f"{root}/sinks", cont_n, args.threads, args.batch, sampler)
    finally:
        sampler.stopping.set()
        print("\n".join(sampler.report()))
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
