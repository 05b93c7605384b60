"""Benchmark: rows/s through the RocketMQ sink into each emulator, against a raw client send loop.

For each transport (``remoting``: the native ``rocketmq-client-python`` against
:class:`RemotingEmulator`; ``grpc``: ``rocketmq-python-client`` 5.x against
:class:`GrpcProxyEmulator`) it times, on the same server in the same run:

* ``raw``: one producer started, ``max_in_flight`` threads calling ``send_sync`` / ``send``
  with the same bodies and keys, the producer shut down (what one partition write costs);
* ``writer``: :meth:`RocketMqPartitionWriter.write` over the same rows (same ``max_in_flight``);
* ``spark`` (unless ``--no-spark``): :meth:`RocketMqSink.write` on a DataFrame of ``--n`` rows in
  ``--partitions`` partitions (``local[2]``; each partition has its own producer and lanes).

It also prints what the writer alone costs per row (lanes, retries, deadlines around a no-op
transport). Rounds alternate raw/writer order and the best round counts. The emulators run in this process,
so clients and server share the GIL: compare ratios, not absolute figures. Every run checks the
emulator stored exactly the rows sent, under their keys.
``python bench/sink_rocketmq.py [--n N] [--max-in-flight K] [--transport remoting|grpc]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from sinks.rocketmq.config import RocketMqSinkConfig
from sinks.rocketmq.sink import RocketMqPartitionWriter, RocketMqSink
from sinks.rocketmq.transports import client_logs
from tests.support.rocketmq_servers import emulator, installed

TOPIC, GROUP = "bench", "GID_bench"


def body(i: int) -> bytes:
    """A ~100-byte CSV row, like the sink's ``csv`` payload."""
    return f"{i},{i % 1000},purchase,{i * 0.01:.2f},2026-11-22T10:00:00.000Z,{'x' * 40}".encode()


def rows(n: int, run: str) -> list[dict]:
    """Send-frame rows as the sink's frame makes them; keys are unique per run."""
    return [
        {"body": body(i), "key": f"{run}-{i}", "source_id": f"{run}-{i}", "props": None} for i in range(n)
    ]


def threaded(n: int, threads: int, send: Callable[[int], None]) -> None:
    """Call ``send(i)`` for i in 0..n-1 from ``threads`` threads, striding; re-raise the first error."""
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(k, n, threads):
                send(i)
        except BaseException as err:
            errors.append(err)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def raw_remoting(address: str, n: int, threads: int, run: str, log_dir: str) -> None:
    """The native producer: start, ``send_sync`` from ``threads`` threads, shut down."""
    with client_logs(log_dir, "native"):
        from rocketmq.client import Message, Producer
        from rocketmq.ffi import dll

        producer = Producer(GROUP, timeout=4000)
        dll.SetProducerLogLevel(producer._handle, 3)  # WARN: it logs every send at INFO
    dll.SetProducerInstanceName(producer._handle, f"bench-raw-{uuid.uuid4().hex[:8]}".encode())
    producer.set_namesrv_addr(address)
    producer.start()

    def send(i: int) -> None:
        m = Message(TOPIC)
        try:
            m.set_keys(f"{run}-{i}")
            b = body(i)
            dll.SetByteMessageBody(m._handle, b, len(b))
            producer.send_sync(m)
        finally:
            m.destroy()

    try:
        threaded(n, threads, send)
    finally:
        producer.shutdown()


def raw_grpc(address: str, n: int, threads: int, run: str, log_dir: str) -> None:
    """The 5.x producer: start, ``send`` from ``threads`` threads, shut down."""
    with client_logs(log_dir, "grpc"):
        from rocketmq.v5.client import ClientConfiguration, Credentials
        from rocketmq.v5.model import Message
        from rocketmq.v5.producer import Producer

    producer = Producer(ClientConfiguration(address, Credentials("", ""), "", 4), [TOPIC])
    producer.startup()

    def send(i: int) -> None:
        m = Message()
        m.topic, m.body, m.keys = TOPIC, body(i), f"{run}-{i}"
        producer.send(m)

    try:
        threaded(n, threads, send)
    finally:
        producer.shutdown()


def sink_cfg(transport: str, address: str, max_in_flight: int, log_dir: str) -> RocketMqSinkConfig:
    return RocketMqSinkConfig.model_validate(
        {
            "type": "rocketmq",
            "name": "bench",
            "topic": TOPIC,
            "endpoint": address,
            "producerGroup": GROUP,
            "transport": transport,
            "send_timeout": "5s",
            "retryTimes": 2,
            "sleepTimeMs": 50,
            "max_in_flight": max_in_flight,
            "client_log_dir": log_dir,
        }
    )


class NoopTransport:
    """A transport that sends nothing: what the writer's lanes, retries and deadlines cost alone."""

    def __init__(self, cfg: RocketMqSinkConfig) -> None:
        self.cfg = cfg

    def start(self) -> None:
        pass

    def send(self, msg) -> str:
        return "noop"

    def classify(self, err: BaseException):
        return err

    def shutdown(self) -> None:
        pass


def overhead_us(n: int, max_in_flight: int, log_dir: str) -> float:
    """Microseconds per row that RocketMqPartitionWriter adds around ``Transport.send``."""
    writer = RocketMqPartitionWriter(
        sink_cfg("remoting", "127.0.0.1:1", max_in_flight, log_dir), NoopTransport
    )
    data = rows(n, "noop")
    t0 = time.perf_counter()
    assert writer.write(data) == (n, [])
    return (time.perf_counter() - t0) / n * 1e6


def timed(server, n: int, run: str, fn: Callable[[], object]) -> float:
    """Run ``fn``; check the server stored the run's ``n`` keys exactly once; return rows/s."""
    before = len(server.messages)
    t0 = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t0
    with server.lock:
        keys = [k for m in server.messages[before:] for k in m.keys]
    want = {f"{run}-{i}" for i in range(n)}
    assert len(keys) == n and set(keys) == want, f"{run}: stored {len(keys)} of {n} (or other keys)"
    return n / elapsed


def spark_rate(spark, server, cfg: RocketMqSinkConfig, n: int, partitions: int, run: str) -> float:
    """RocketMqSink.write on a DataFrame of ``n`` rows (the frame's to_csv included)."""
    from pyspark.sql import functions as F

    df = (
        spark.range(n, numPartitions=partitions)
        .select(
            F.col("id").alias("event_id"),
            (F.col("id") % 1000).alias("user_id"),
            F.lit("purchase").alias("action"),
            F.lit("x" * 40).alias("pad"),
            F.struct(F.concat(F.lit(f"{run}-"), F.col("id").cast("string")).alias("message_id")).alias(
                "_meta"
            ),
        )
        .cache()
    )
    df.count()  # materialize: time the sink, not the data generation
    try:
        return timed(server, n, run, lambda: RocketMqSink(cfg).write(df, 0).written)
    finally:
        df.unpersist()


def bench(transport: str, args: argparse.Namespace, log_dir: str, spark) -> dict[str, float]:
    server = emulator(transport, log_dir)
    raw = raw_remoting if transport == "remoting" else raw_grpc
    cfg = sink_cfg(transport, server.address, args.max_in_flight, log_dir)
    best: dict[str, float] = {}

    def record(kind: str, rate: float) -> None:
        best[kind] = max(best.get(kind, 0.0), rate)
        print(f"  {transport:8s} {kind:6s} {rate:10.0f} rows/s", flush=True)

    try:
        # Warm up both paths (imports, first connection) on a few rows, untimed.
        raw(server.address, 20, args.max_in_flight, "warm-raw", log_dir)
        RocketMqPartitionWriter(cfg).write(rows(20, "warm-writer"))
        for r in range(args.rounds):
            for kind in ("raw", "writer") if r % 2 == 0 else ("writer", "raw"):
                run = f"{kind}{r}"
                if kind == "raw":
                    fn = functools.partial(raw, server.address, args.n, args.max_in_flight, run, log_dir)
                else:
                    fn = functools.partial(RocketMqPartitionWriter(cfg).write, rows(args.n, run))
                record(kind, timed(server, args.n, run, fn))
        if spark is not None:
            spark_rate(spark, server, cfg, 100, args.partitions, "warm-spark")  # start the Python workers
            for r in range(args.rounds):
                record("spark", spark_rate(spark, server, cfg, args.n, args.partitions, f"spark{r}"))
    finally:
        server.stop()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="rows per timed run")
    ap.add_argument("--max-in-flight", type=int, default=8, help="sink lanes = raw threads")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=2, help="DataFrame partitions (spark runs)")
    ap.add_argument("--transport", choices=["remoting", "grpc"], action="append")
    ap.add_argument("--no-spark", action="store_true", help="skip RocketMqSink.write on a DataFrame")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", "The 'warn' method is deprecated", DeprecationWarning)
    transports = [t for t in args.transport or ["remoting", "grpc"] if installed(t)]
    if not transports:
        sys.exit("no RocketMQ client installed (make rocketmq)")
    log_dir = tempfile.mkdtemp(prefix="rocketmq-bench-logs-")
    spark = None
    if not args.no_spark:
        from ingest.runtime.spark import make_session

        spark = make_session("local[2]", "bench-rocketmq", {}, "ERROR")
    print(f"n={args.n} max_in_flight={args.max_in_flight} rounds={args.rounds} (best round counts)")
    results = {t: bench(t, args, log_dir, spark) for t in transports}
    print(f"\n{'transport':10s} {'raw rows/s':>11s} {'writer rows/s':>14s} {'writer/raw':>11s}", end="")
    print(f" {'spark rows/s':>13s} {'spark/raw':>10s}" if spark is not None else "")
    for t, best in results.items():
        line = f"{t:10s} {best['raw']:11.0f} {best['writer']:14.0f} {best['writer'] / best['raw']:11.2f}"
        if spark is not None:
            line += f" {best['spark']:13.0f} {best['spark'] / best['raw']:10.2f}"
        print(line)
    noop = overhead_us(args.n, args.max_in_flight, log_dir)
    print(f"writer overhead (no-op transport, same lanes): {noop:.0f} us/row")
    if spark is not None:
        print(f"(spark: {args.partitions} partitions, each with its own producer and max_in_flight lanes)")
        spark.stop()


if __name__ == "__main__":
    main()
