"""Benchmark: the stager writing to a local dir vs to moto's S3 server on 127.0.0.1 (no Spark).

Stages N lines of 300 bytes in rolls of 2,000 lines, handed over ten at a time as a receiver does,
with the gate off (each file published at once) and holding 10 files a publish; prints lines/s,
the stager process's CPU a line (every thread of it: boto3's too), the server's CPU, and the PUTs.
Run: ``python bench/stager_s3.py [--lines 200000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from ingest.intake.staging import Stager
from ingest.storage.aws import s3_client
from tests.support.s3_server import s3_server

LINE = 300
ROLL = 2_000


def lines(n: int) -> list[bytes]:
    return [(b"%010d" % i).ljust(LINE - 1, b"x") for i in range(n)]


class Puts:
    """Counts the PUTs the process's S3 client sends."""

    def __init__(self) -> None:
        self.n = 0
        s3_client().meta.events.register("before-call.s3.PutObject", self.seen)

    def seen(self, **_: object) -> None:
        self.n += 1


def stage(directory: str, data: list[bytes], batch_messages: int) -> tuple[float, float]:
    """Stage ``data``; return the wall and this process's CPU seconds."""
    st = Stager(directory, ROLL, 1 << 30, 60, batch_messages=batch_messages, batch_wait=60)
    st.start()
    wall, cpu = time.perf_counter(), time.process_time()
    for k in range(0, len(data), 10):
        st.add(data[k : k + 10])
    st.stop()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=200_000)
    n = parser.parse_args().lines
    data = lines(n)
    with s3_server() as s3:
        os.environ.update(s3.env)
        server = psutil.Process(s3.proc.pid)
        puts = Puts()
        print(f"{n:,} lines of {LINE} B, rolls of {ROLL:,} lines")
        print(f"{'where':<30} {'lines/s':>10} {'µs CPU/line':>12} {'server CPU s':>13} {'PUTs':>6}")
        for gate in (1, 10 * ROLL):
            label = "gate off" if gate == 1 else "gate: 10 files a publish"
            with tempfile.TemporaryDirectory() as tmp:
                wall, cpu = stage(tmp, data, gate)
                print(f"{'local, ' + label:<30} {n / wall:>10,.0f} {cpu / n * 1e6:>12.2f} {'-':>13} {'-':>6}")
            bucket = s3.bucket(f"bench-{gate}")
            before, server_cpu = puts.n, sum(server.cpu_times()[:2])
            wall, cpu = stage(f"s3a://{bucket}/staging", data, gate)
            server_cpu = sum(server.cpu_times()[:2]) - server_cpu
            row = f"{'S3, ' + label:<30} {n / wall:>10,.0f} {cpu / n * 1e6:>12.2f} {server_cpu:>13.1f}"
            print(f"{row} {puts.n - before:>6}")


if __name__ == "__main__":
    main()
