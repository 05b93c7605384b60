"""The intake benchmark's baselines: raw boto3, awscrt and aliyun-mns-sdk loops on threads, rate and CPU."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from typing import Any

from bench.e2e_mns import raw_loop as mns_raw_loop
from bench.e2e_mns import timed_drain
from bench.endless import endpoint
from bench.memory import RAW_BUDGET, RssSampler

CLIENTS = {"sqs": "boto3", "mns": "aliyun-mns-sdk"}
"""The SDK each queue's raw client loop calls."""
QUEUE = "endless"
"""The queue's name in the URLs the raw loops and the pipeline call."""


def sqs_queue_url(url: str) -> str:
    return f"{url}/000000000000/{QUEUE}"


def sqs_raw_loop(url: str) -> Callable[[], int]:
    """One thread's raw boto3 loop (a client of its own, as each receiver has): receive(10), delete."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": 1})
    sqs = boto3.client("sqs", endpoint_url=url, region_name=os.environ["AWS_REGION"], config=config)
    queue = sqs_queue_url(url)

    def step() -> int:
        resp = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        msgs = resp.get("Messages", [])
        entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
        if entries:
            sqs.delete_message_batch(QueueUrl=queue, Entries=entries)
        return len(msgs)

    return step


def crt_raw_loop(url: str) -> Callable[[], int]:
    """One thread's raw loop through the pipeline's awscrt client (``sources.sqs.crt``), shared
    by the threads as the pipeline shares it: receive(10), delete."""
    import boto3

    from sources.sqs.crt import CrtSqs

    global _CRT
    credentials = boto3.session.Session().get_credentials()
    sqs = _CRT = _CRT or CrtSqs(url, os.environ["AWS_REGION"], credentials)
    queue = sqs_queue_url(url)

    def step() -> int:
        resp = sqs.call(
            "ReceiveMessage", {"QueueUrl": queue, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}
        )
        msgs = resp.get("Messages", [])
        entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
        if entries:
            sqs.call("DeleteMessageBatch", {"QueueUrl": queue, "Entries": entries})
        return len(msgs)

    return step


_CRT: Any = None


def raw_rate(queue: str, url: str, n: int, threads: int, crt: bool = False) -> tuple[float, float]:
    """msgs/s of the raw client loop over ``n`` messages of the endless ``url``, and its CPU µs a message."""
    global _CRT
    batch = 10 if queue == "sqs" else 16
    calls = itertools.count()  # the endpoint never runs dry: stop after the calls that make n
    limit = -(-n // batch)

    # The clients are made before the clock starts, as the pipeline makes its receivers' before.
    _CRT = None
    loop = crt_raw_loop if crt else sqs_raw_loop
    steps = [loop(url) if queue == "sqs" else mns_raw_loop(url, QUEUE) for _ in range(threads)]

    def make() -> Callable[[], int]:
        step = steps.pop()
        return lambda: step() if next(calls) < limit else 0

    cpu0 = time.process_time()
    rate = timed_drain(n, threads, make)
    return rate, (time.process_time() - cpu0) * 1e6 / n


def baselines(
    queue: str, latency_ms: int, threads: int, n: int, sampler: RssSampler
) -> tuple[float, dict, float, float]:
    """The raw client loop over ``n`` messages and, for SQS, the awscrt loop, each on a fresh
    endpoint in a memory window of ``sampler``, their lines printed: the raw loop's msgs/s, its
    endpoint's last counts, and the awscrt loop's msgs/s and client CPU µs a message (0 for MNS)."""
    raw, _, raw_ep = _measured(queue, latency_ms, threads, n, sampler, crt=False)
    crt = crt_cpu = 0.0
    if queue == "sqs":
        crt, crt_cpu, _ = _measured(queue, latency_ms, threads, n, sampler, crt=True)
    return raw, raw_ep, crt, crt_cpu


def _measured(
    queue: str, latency_ms: int, threads: int, n: int, sampler: RssSampler, crt: bool
) -> tuple[float, float, dict]:
    """One raw loop (:func:`raw_rate`) on a fresh endpoint in a memory window, its line printed:
    msgs/s, client CPU µs a message, and the endpoint's last counts."""
    client, lib = ("awscrt", "sources.sqs.crt") if crt else (CLIENTS[queue], CLIENTS[queue])
    with (
        endpoint(queue, latency_ms) as ep,
        sampler.run_window(f"raw {client} loop ({queue}, {latency_ms} ms)", RAW_BUDGET),
    ):
        rate, cpu = raw_rate(queue, ep.url, n, threads, crt=crt)
        counts = ep.stop()
        what = f"{lib}, {threads} threads, {n:,} msgs; client CPU {cpu:.0f} us/msg"
        print(f"raw {'awscrt' if crt else 'client'} loop: {rate:,.0f} msgs/s ({what})", flush=True)
    return rate, cpu, counts


def send_rate(url: str, bodies: list[str], threads: int) -> tuple[float, float]:
    """msgs/s of a raw boto3 ``send_message_batch`` loop sending ``bodies`` (10 a call) on
    ``threads`` threads sharing one client, and its CPU µs a message."""
    import boto3
    from botocore.config import Config

    n = len(bodies)
    queue = sqs_queue_url(url)
    config = Config(retries={"total_max_attempts": 1}, max_pool_connections=threads)
    sqs = boto3.client("sqs", endpoint_url=url, region_name=os.environ["AWS_REGION"], config=config)
    chunks = iter(range(0, n, 10))

    def step() -> int:
        start = next(chunks, None)
        if start is None:
            return 0
        entries = [{"Id": str(k), "MessageBody": b} for k, b in enumerate(bodies[start : start + 10])]
        sqs.send_message_batch(QueueUrl=queue, Entries=entries)
        return len(entries)

    cpu0 = time.process_time()
    rate = timed_drain(n, threads, lambda: step)
    return rate, (time.process_time() - cpu0) * 1e6 / n
