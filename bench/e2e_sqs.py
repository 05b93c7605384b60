"""Benchmark: SQS → Spark → SQS through the exactly-once path on moto, vs a raw boto3 receive+delete loop.

Prints msgs/s of both, their ratio, p50/p99 latency (source SentTimestamp → target SentTimestamp)
and peak RSS. moto slows down with queue depth, so keep ``--messages`` modest; compare only the
ratio, measured on the same server in the same run. ``python bench/e2e_sqs.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")

import boto3
import orjson
from moto.server import ThreadedMotoServer

from bench.e2e_fake import SCHEMA, RssSampler, body
from ingest.config import parse_config
from ingest.pipeline import Job


def send_all(sqs, url: str, n: int) -> None:
    for i in range(0, n, 10):
        entries = [{"Id": str(k), "MessageBody": body(i + k)["body"]} for k in range(min(10, n - i))]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


def drain_raw(sqs, url: str, n: int, threads: int) -> float:
    done = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal done
        while True:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            )
            if not msgs:
                return
            entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
            with lock:
                done += len(msgs)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert done >= n, (done, n)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    sampler = RssSampler()
    sampler.start()
    try:
        raw_q = sqs.create_queue(QueueName="raw")["QueueUrl"]
        send_all(sqs, raw_q, args.messages)
        raw = drain_raw(sqs, raw_q, args.messages, args.threads)
        print(f"raw boto3 receive+delete loop: {raw:,.0f} msgs/s ({args.threads} threads)")

        src = sqs.create_queue(QueueName="src")["QueueUrl"]
        dst = sqs.create_queue(QueueName="dst")["QueueUrl"]
        send_all(sqs, src, args.messages)
        root = tempfile.mkdtemp(prefix="mq-bench-sqs-")
        cfg = {
            "name": "bench-sqs",
            "sources": [
                {
                    "type": "sqs",
                    "name": "src",
                    "sqs.url": src,
                    "sqs.endpoint.url": endpoint,
                    "sqs.waittime.seconds": 1,
                    "receivers": args.threads,
                    "format": "json",
                }
            ],
            "schema": SCHEMA,
            "transform": "SELECT event_id, amount, _meta.sent_ts AS src_sent_ts FROM source",
            "sinks": [{"type": "sqs", "name": "dst", "sqsUrl": dst, "endpoint_url": endpoint}],
            "checkpoint": f"{root}/ckpt",
            "state": {"path": f"{root}/state"},
            "staging": {"dir": f"{root}/staging", "roll_messages": 1000, "roll_interval": "250ms"},
            "trigger": {"mode": "available_now"},
            "spark": {"master": "local[2]", "log_level": "ERROR"},
            "metrics": {"print_batches": False},
        }
        job = Job(parse_config(cfg), echo=lambda s: None)
        t0 = time.perf_counter()
        assert job.run() == 0
        elapsed = time.perf_counter() - t0
        s = job.metrics.summary()
        assert s["written"] == args.messages, s
        rate = args.messages / elapsed
        print(
            f"SQS → Spark → SQS pipeline: {rate:,.0f} msgs/s ({args.messages:,} msgs in {elapsed:.1f}s, "
            "session start included)"
        )
        print(f"ratio pipeline/raw: {rate / raw:.2f}x")
        lat = []
        while True:
            msgs = sqs.receive_message(
                QueueUrl=dst, MaxNumberOfMessages=10, AttributeNames=["SentTimestamp"]
            ).get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                lat.append(int(m["Attributes"]["SentTimestamp"]) - orjson.loads(m["Body"])["src_sent_ts"])
            sqs.delete_message_batch(
                QueueUrl=dst,
                Entries=[{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)],
            )
        lat.sort()
        print(
            f"latency source→target (all enqueued at start): p50 {lat[len(lat) // 2]} ms, "
            f"p99 {lat[int(len(lat) * 0.99)]} ms"
        )
        print(f"peak RSS (Python + JVM + moto): {sampler.peak / 2**20:,.0f} MiB")
    finally:
        sampler.stopping.set()
        server.stop()


if __name__ == "__main__":
    main()
