"""Benchmark: SQS → Spark → SQS through the exactly-once path, vs a raw boto3 receive+delete loop.

Prints msgs/s of the raw loop, of SqsSource's receive+ack loop with the same thread count, and
of the pipeline (a drain SQS → Spark → SQS with the session start, and ``sustained``: a
continuous run SQS → Spark → files, as in ``bench/e2e_fake.py``, from its first to its last
commit, with an in-flight window of a quarter of the run); their ratios; p50/p99 latency
(source SentTimestamp → target SentTimestamp) and peak RSS. ``--server localstack`` (built by
``make localstack``) is close to SQS and flat with depth; moto slows down with queue depth, so
keep ``--messages`` modest there. Compare only ratios measured on the same server in the same
run. ``python bench/e2e_sqs.py [--server moto|localstack] [--messages N] [--sustained N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
os.environ.setdefault("AWS_REGION", "us-east-1")  # local queue URLs name no region

import boto3
import orjson
from moto.server import ThreadedMotoServer

from bench.continuous import phase_table, sustained
from bench.e2e_fake import SCHEMA, body
from bench.memory import RssSampler, tree_cpu, tree_rss
from ingest.config import parse_config
from ingest.pipeline import Job
from sources.sqs.config import SqsSourceConfig
from sources.sqs.source import SqsSource
from tests.support.jobconfig import job_config


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


def drain_source(endpoint: str, url: str, n: int, threads: int) -> float:
    """The same loop through SqsSource.receive + ack (per-thread clients, batched deletes)."""
    cfg = {
        "type": "sqs",
        "name": "b",
        "sqs.url": url,
        "sqs.endpoint.url": endpoint,
        "sqs.waittime.seconds": 1,
    }
    source = SqsSource(SqsSourceConfig.model_validate(cfg))
    done = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal done
        while True:
            msgs = source.receive(10, 1)
            if not msgs:
                return
            res = source.ack([m.receipt_handle for m in msgs])
            with lock:
                done += len(res.deleted)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert done >= n, (done, n)
    return n / (time.perf_counter() - t0)


@contextlib.contextmanager
def sqs_server(kind: str, workdir: Path) -> Iterator[str]:
    """moto's threaded server, or LocalStack as a process; yields the endpoint URL."""
    if kind == "localstack":
        from tests.support.localstack_server import available, localstack_server

        ok, why = available()
        if not ok:
            raise SystemExit(why)
        with localstack_server(workdir) as url:
            yield url
        return
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server", choices=["moto", "localstack"], default="moto")
    ap.add_argument("--messages", type=int, default=None, help="default 300 on moto, 5000 on LocalStack")
    ap.add_argument("--sustained", type=int, default=None, help="default 300 on moto, 20000 on LocalStack")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    args.messages = args.messages or (5000 if args.server == "localstack" else 300)
    args.sustained = args.sustained or (20_000 if args.server == "localstack" else 300)
    with sqs_server(args.server, Path(tempfile.mkdtemp(prefix="mq-bench-sqs-server-"))) as endpoint:
        run(args, endpoint)


def run(args: argparse.Namespace, endpoint: str) -> None:
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    sampler = RssSampler()
    sampler.start()
    try:
        # Alternate the order: on moto whichever loop runs second is faster.
        rates: dict[str, list[float]] = {"raw": [], "source": []}
        for i, kind in enumerate(["raw", "source", "source", "raw"]):
            q = sqs.create_queue(QueueName=f"{kind}-loop-{i}")["QueueUrl"]
            send_all(sqs, q, args.messages)
            if kind == "raw":
                rates[kind].append(drain_raw(sqs, q, args.messages, args.threads))
            else:
                rates[kind].append(drain_source(endpoint, q, args.messages, args.threads))
        raw, loop = (sum(rates[k]) / len(rates[k]) for k in ("raw", "source"))
        shown = {k: ", ".join(f"{r:,.0f}" for r in v) for k, v in rates.items()}
        print(f"raw boto3 receive+delete loop: {raw:,.0f} msgs/s ({shown['raw']}; {args.threads} threads)")
        print(
            f"SqsSource receive+ack loop: {loop:,.0f} msgs/s ({shown['source']}), "
            f"ratio to raw {loop / raw:.2f}x"
        )

        src = sqs.create_queue(QueueName="src")["QueueUrl"]
        dst = sqs.create_queue(QueueName="dst")["QueueUrl"]
        send_all(sqs, src, args.messages)
        root = tempfile.mkdtemp(prefix="mq-bench-sqs-")
        source = {"type": "sqs", "name": "src", "sqs.url": src, "sqs.endpoint.url": endpoint}
        source |= {"sqs.waittime.seconds": 1, "receivers": args.threads, "format": "json"}
        source["on_bad_message"] = "skip"  # as bench/e2e_fake.py: the files sink's one-job write
        common = {
            "name": "bench-sqs",
            "schema": SCHEMA,
            "transform": "SELECT event_id, amount, _meta.sent_ts AS src_sent_ts FROM source",
            "metrics": {"print_batches": False},
        }
        staging = {"roll_messages": 1000, "roll_interval": "250ms"}
        sqs_sink = {"type": "sqs", "name": "dst", "sqsUrl": dst, "endpoint_url": endpoint}
        cfg = job_config(
            source, root, [sqs_sink], staging=staging, trigger={"mode": "available_now"}, **common
        )
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
        print(f"ratio drain/raw: {rate / raw:.2f}x")
        steady_src = sqs.create_queue(QueueName="steady-src")["QueueUrl"]
        # The raw loop writes nothing: a files sink keeps the server's load that of the loop's.
        files = {"type": "files", "name": "out", "path": f"{root}/steady/out"}
        # A window well under the run's size: receivers cannot stage the run before the clock starts.
        window = max(1000, args.sustained // 4)
        steady_cfg = job_config(
            source | {"sqs.url": steady_src},
            f"{root}/steady",
            [files],
            staging={**staging, "max_in_flight": window},
            trigger={"mode": "processing_time", "interval": "500ms"},
            **common,
        )
        n = args.sustained
        steady = sustained(n, steady_cfg, lambda: send_all(sqs, steady_src, n), tree_cpu, tree_rss)
        print(steady.line())
        print(f"ratio pipeline/raw: {steady.rate / raw:.2f}x")
        print(phase_table(steady))
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
        print(f"peak RSS: {sampler.peak}; the driver holds the server if it runs in this process")
    finally:
        sampler.stopping.set()


if __name__ == "__main__":
    main()
