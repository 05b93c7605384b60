"""Benchmark: the fake-queue pipeline with staging on a local directory and on S3, back to back.

One process, one SparkSession (with the S3A jars), moto's S3 server as a process of its own on
127.0.0.1. Each round runs the same continuous job (``bench/continuous.sustained``) twice: staging
local, then ``staging.dir: s3a://…``; checkpoint, state and sink stay local in both, so the
difference is staging's. Printed per run: msgs/s, the driver's CPU a message (Python + JVM), the
S3 server's CPU a message, requests by kind and per batch (PUTs of staged objects, LISTs, GETs,
deletes) from the server's request log, and peak RSS against its budget. The ratio s3/local is
the figure issue 54 bounds (staging on S3 costs at most 25% of local staging's throughput).
Run: ``python bench/staging_s3.py [--messages N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import psutil

from bench.continuous import phase_table, sustained
from bench.e2e_fake import job_cfg, seed
from bench.memory import FILES_BUDGET, RssSampler, tree_cpu
from ingest.config import parse_config
from ingest.runtime.s3a import job_conf
from ingest.runtime.spark import make_session
from sources.fake.store import FakeQueue
from tests.support.s3_server import s3_server

_REQUEST = re.compile(r'"(GET|PUT|POST|DELETE|HEAD) (/[^ ]*) HTTP')


def requests(log: Path, since: int) -> tuple[collections.Counter, int]:
    """The server's requests logged after byte ``since``, by kind; and the log's new end."""
    data = log.read_bytes()
    kinds: collections.Counter = collections.Counter()
    for method, path in _REQUEST.findall(data[since:].decode(errors="replace")):
        if method == "GET" and ("list-type=2" in path or "delimiter=" in path or "prefix=" in path):
            kinds["LIST"] += 1
        elif method == "POST" and "delete" in path:
            kinds["DELETE (batch)"] += 1
        elif method == "PUT" and "/staging/" in path:
            kinds["PUT staged object"] += 1
        else:
            kinds[method] += 1
    return kinds, len(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args()
    sampler = RssSampler()
    sampler.start()
    rates: dict[str, list[float]] = collections.defaultdict(list)
    with s3_server() as s3, tempfile.TemporaryDirectory(prefix="bench-s3-") as root:
        os.environ.update(s3.env)
        s3.bucket("bench")
        server = psutil.Process(s3.proc.pid)
        # The process's one session, made first with S3A (a running session's jars cannot change).
        session_cfg = job_cfg(f"{root}/session", args.threads, args.batch, "processing_time")
        session_cfg["staging"]["dir"] = "s3a://bench/session/staging"
        first = parse_config(session_cfg)
        make_session(first.spark.master, "bench", job_conf(first, first.spark.conf), first.spark.log_level)
        for r in range(args.rounds):
            for where in ("local", "s3"):
                base = f"{root}/{r}-{where}"
                cfg = job_cfg(base, args.threads, args.batch, "processing_time")
                if where == "s3":
                    cfg["staging"]["dir"] = f"s3a://bench/{r}/staging"
                queue = FakeQueue(f"{base}/q", "in")
                c0, mark = server.cpu_times(), s3.log.stat().st_size
                with sampler.run_window(f"staging {where}, round {r + 1}", FILES_BUDGET):
                    run = sustained(
                        args.messages, cfg, lambda q=queue: seed(q, args.messages), tree_cpu, sampler.latest
                    )
                c1 = server.cpu_times()
                kinds, _ = requests(s3.log, mark)
                server_us = ((c1.user + c1.system) - (c0.user + c0.system)) * 1e6 / max(1, run.messages)
                rates[where].append(run.rate)
                print(f"staging {where}, round {r + 1}: {run.line()}; {run.cpu_line()}")
                print(f"  S3 server CPU a message: {server_us:.1f} µs; batches: {run.batches}")
                for kind, n in sorted(kinds.items()):
                    print(f"  {kind}: {n:,} ({n / max(1, run.batches):.1f} a batch)")
                print(phase_table(run))
        for r in range(args.rounds):
            ratio = rates["s3"][r] / rates["local"][r]
            print(f"round {r + 1}: ratio s3/local staging {ratio:.2f}x sustained")
    sampler.stopping.set()
    for line in sampler.report():
        print(line)


if __name__ == "__main__":
    main()
