"""Benchmark: MiB/s of 1 MiB claim-check payloads through the pipeline, vs a raw S3 get+put loop.

One moto server (S3 and SQS) in this process. ``--payloads`` 1 MiB payloads are stored as AWS's
SQS Extended Client stores them (the object in a bucket, a pointer message with the
``ExtendedPayloadSize`` attribute). The raw loop gets each object and puts it to another bucket
with ``--threads`` threads. The pipeline is a drain (``available_now``): the SQS source fetches
each payload in the executors, the SQS sink offloads every record (``threshold: always``) to an
output bucket and sends a pointer. Printed: both rates (the pipeline's with the session start,
and from its first to its last commit), their ratio, the phase table, and a check of the books
(N pointers on the target queue and N objects of 1 MiB); a mismatch exits non-zero.
Run: ``python bench/claim_check.py [--quick] [--payloads N]
[--threads T]`` (``make bench-claim-check``, about a minute).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
os.environ.setdefault("AWS_REGION", "us-east-1")  # moto's queue URLs name no region

import boto3
from botocore.config import Config

from bench.continuous import Sustained, phase_table
from bench.e2e_sqs import sqs_server
from bench.memory import RssSampler, tree_cpu, tree_rss
from ingest.config import parse_config
from ingest.connector.claim_check import SIZE_ATTRIBUTE, pointer_body
from ingest.pipeline import Job
from tests.support.jobconfig import job_config

MIB = 1024 * 1024
IN_BUCKET, RAW_BUCKET, OUT_BUCKET = "cc-in", "cc-raw-out", "cc-out"


def payload(i: int, block: str) -> bytes:
    """The ``i``-th 1 MiB payload: its number, then ASCII that does not compress."""
    return (f"{i:08d}" + block[8:]).encode()


def seed(s3, sqs, url: str, n: int, threads: int) -> list[str]:
    """Store ``n`` payloads as the Extended Client does; return their keys."""
    block = os.urandom(MIB // 2).hex()
    keys = [f"payloads/{i:06d}" for i in range(n)]
    with ThreadPoolExecutor(threads) as pool:
        list(
            pool.map(lambda i: s3.put_object(Bucket=IN_BUCKET, Key=keys[i], Body=payload(i, block)), range(n))
        )
    size = {SIZE_ATTRIBUTE: {"DataType": "Number", "StringValue": str(MIB)}}
    for start in range(0, n, 10):
        entries = [
            {"Id": str(k), "MessageBody": pointer_body(IN_BUCKET, key), "MessageAttributes": size}
            for k, key in enumerate(keys[start : start + 10])
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return keys


def raw_loop(s3, keys: list[str], threads: int) -> float:
    """MiB/s of get_object + put_object of every payload, ``threads`` at once."""

    def copy(key: str) -> int:
        data = s3.get_object(Bucket=IN_BUCKET, Key=key)["Body"].read()
        s3.put_object(Bucket=RAW_BUCKET, Key=key, Body=data)
        return len(data)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        moved = sum(pool.map(copy, keys))
    return moved / MIB / (time.perf_counter() - t0)


def run_pipeline(cfg: dict, n: int) -> tuple[float, Sustained | None]:
    """Drain with the job; return its seconds (session start included) and, when it took more than
    one batch, what it did from the end of its first batch to the end of the one that wrote row ``n``."""
    job = Job(parse_config(cfg), echo=lambda s: None)
    result: list[int] = []
    t0 = time.perf_counter()
    runner = threading.Thread(target=lambda: result.append(job.run()), name="bench-job")
    runner.start()
    marks: list[tuple[float, float, float, float, dict[str, float]]] = []
    """(time, batches, rows written, CPU seconds, phase seconds) each time a batch ends."""
    while runner.is_alive() and not (marks and marks[-1][2] >= n):
        batches = job.metrics.total("batches")
        if batches != (marks[-1][1] if marks else 0):
            written = job.metrics.total("written")  # read after batches: that batch's rows are in
            phases = job.metrics.by_label("phaseSeconds", "phase")
            marks.append((time.perf_counter(), batches, written, tree_cpu(), phases))
        time.sleep(0.01)
    runner.join()
    total = time.perf_counter() - t0
    if result != [0] or job.metrics.total("written") != n:
        raise SystemExit(f"the job ended with {result} after writing {job.metrics.summary()}, not {n} rows")
    if len(marks) < 2:
        return total, None
    (t1, b1, w1, c1, p1), (t2, b2, _, c2, p2) = marks[0], marks[-1]
    phases = {k: v - p1.get(k, 0.0) for k, v in p2.items()}
    return total, Sustained(int(n - w1), t2 - t1, c2 - c1, 0, tree_rss(), phases, int(b2 - b1))


def check_books(s3, sqs, out_url: str, n: int) -> bool:
    """Print the check line: every payload arrived once, whole."""
    names = ["ApproximateNumberOfMessages"]
    messages = int(sqs.get_queue_attributes(QueueUrl=out_url, AttributeNames=names)["Attributes"][names[0]])
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=OUT_BUCKET)
    sizes = [o["Size"] for page in pages for o in page.get("Contents", [])]
    ok = messages == n and len(sizes) == n and set(sizes) == {MIB}
    odd = sum(s != MIB for s in sizes)
    print(
        f"check: target queue {messages} messages, {OUT_BUCKET} {len(sizes)} objects "
        f"({odd} not 1 MiB), expected {n}: {'OK' if ok else 'MISMATCH'}"
    )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="40 payloads instead of 200")
    ap.add_argument("--payloads", type=int, default=None, help="1 MiB payloads (default 200)")
    ap.add_argument("--threads", type=int, default=4, help="threads of the raw loop")
    args = ap.parse_args()
    n = args.payloads or (40 if args.quick else 200)
    with sqs_server("moto", Path(tempfile.mkdtemp(prefix="mq-bench-cc-server-"))) as endpoint:
        sys.exit(0 if run(endpoint, n, args.threads) else 1)


def run(endpoint: str, n: int, threads: int) -> bool:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    pool = Config(max_pool_connections=max(10, threads * 2))
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=pool)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    for name in (IN_BUCKET, RAW_BUCKET, OUT_BUCKET):
        s3.create_bucket(Bucket=name)
    src = sqs.create_queue(QueueName="cc-src")["QueueUrl"]
    dst = sqs.create_queue(QueueName="cc-dst")["QueueUrl"]
    sampler = RssSampler()
    sampler.start()
    try:
        t0 = time.perf_counter()
        keys = seed(s3, sqs, src, n, threads)
        print(f"seeded {n} payloads of 1 MiB (Extended Client format) in {time.perf_counter() - t0:.1f}s")
        raw = raw_loop(s3, keys, threads)
        print(f"raw S3 get+put loop: {raw:,.1f} MiB/s ({threads} threads)")
        for start in range(0, n, 1000):  # free the server's memory for the pipeline
            chunk = [{"Key": k} for k in keys[start : start + 1000]]
            s3.delete_objects(Bucket=RAW_BUCKET, Delete={"Objects": chunk})

        root = tempfile.mkdtemp(prefix="mq-bench-cc-")
        source = {"type": "sqs", "name": "src", "sqs.url": src, "sqs.endpoint.url": endpoint}
        source |= {"sqs.waittime.seconds": 1, "receivers": 2, "format": "raw"}
        source["claim_check"] = {"endpoint_url": endpoint, "delete_payload": False}
        sink = {"type": "sqs", "name": "dst", "sqsUrl": dst, "endpoint_url": endpoint}
        sink |= {"body_format": "raw", "body_column": "body"}
        sink["claim_check"] = {"bucket": OUT_BUCKET, "endpoint_url": endpoint, "threshold": "always"}
        target = f"SQS (offloading to {OUT_BUCKET})"
        # 20 payloads (20 MiB) a batch, in two staged files: two Spark tasks fetch at once.
        staging = {"roll_messages": 10, "roll_interval": "250ms", "max_files_per_trigger": 2}
        cfg = job_config(
            source, root, [sink], name="bench-claim-check", schema="body STRING", staging=staging
        )
        cfg["metrics"] = {"print_batches": False}
        total, steady = run_pipeline(cfg, n)
        rate = n / total
        print(
            f"claim-check pipeline: {rate:,.1f} MiB/s (SQS → Spark → {target}; {n} MiB in {total:.1f}s, "
            "session start included)"
        )
        if steady is None:
            print(f"ratio pipeline/raw: {rate / raw:.2f}x (one batch: no first-to-last-commit rate)")
        else:
            print(
                f"claim-check pipeline, first to last commit: {steady.rate:,.1f} MiB/s "
                f"({steady.messages} MiB in {steady.seconds:.1f}s, {steady.batches} batches)"
            )
            print(f"ratio pipeline/raw: {rate / raw:.2f}x (first to last commit: {steady.rate / raw:.2f}x)")
            print(phase_table(steady))
        ok = check_books(s3, sqs, dst, n)
        print(f"peak RSS: {sampler.peak}; the driver holds moto, a server in this process")
        return ok
    finally:
        sampler.stopping.set()


if __name__ == "__main__":
    main()
