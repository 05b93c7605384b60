"""Benchmark: the client side of real-queue intake, on endless SQS and MNS endpoints that cost little.

Per queue (sqs, mns) and added latency per call (0, 20 ms): the raw client loop (boto3
``receive_message(10)`` + ``delete_message_batch``; aliyun-mns-sdk ``batch_receive_message(16)``
+ ``batch_delete_message``) on as many threads as the pipeline has receivers, for SQS the same
loop through the pipeline's awscrt client (``sources/sqs/crt.py``), then the pipeline,
continuous (500 ms trigger, ``--trigger``) into the files sink (``bench/continuous.py::sustained``), in a
child process with a fresh driver JVM. The pipeline's clock starts once half of its
messages are written (``WARM``), past the JVM's JIT warm-up; its driver CPU is split by thread. Each run
gets a fresh endpoint (``bench/endless_*.js``), whose own CPU per message must stay under a
quarter of the driver's, or it, not the client, would be what is measured. Then the SQS
sink's partition writer (awscrt and boto3) against a raw ``send_message_batch`` loop with as
many calls in flight, and last the no-latency SQS pipeline again under ``taskset`` on one
core, against two. Figures on a shared 2-core machine are noisy: compare within one run.
Run: ``python bench/intake.py [--quick] [--queue sqs|mns] [--latency-ms N] [--receivers N]``
(``make bench-intake``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
os.environ.setdefault("AWS_REGION", "us-east-1")  # local queue URLs name no region

from bench.continuous import Sustained, phase_table, sustained
from bench.cpu_split import Snapshots
from bench.e2e_fake import SCHEMA, STAGING
from bench.e2e_mns import job_cfg as mns_job_cfg
from bench.endless import endpoint
from bench.memory import FILES_BUDGET, RAW_BUDGET, Rss, RssSampler, Window
from bench.raw_loops import CLIENTS, QUEUE, baselines, send_rate, sqs_queue_url
from ingest.runtime.memory import cap_arenas
from tests.support.jobconfig import job_config

THREADS = {("sqs", 0): 2, ("sqs", 20): 32, ("mns", 0): 2, ("mns", 20): 20}
"""Receivers (and raw-loop threads) per queue and added latency. MNS at 20 ms: 20 threads of 16
messages a call hold as many messages per round trip as SQS's 32 threads of 10."""
SOURCE_OPTIONS: dict[str, Any] = {}
"""Options ``--set`` adds to the pipeline's source config."""
TRIGGER = "500ms"
"""The pipeline's ``trigger.interval`` (``--trigger``): the issue's measurements used 500 ms."""
STAGING_SET: dict[str, Any] = {}
"""Staging options the pipeline runs take over the job's (``--batch-messages``)."""
RESULT = "intake-result: "
"""The child's line that carries its figures to the parent."""


@dataclasses.dataclass
class Sizes:
    """Messages per raw loop and per pipeline run, without and with added latency."""

    raw: int
    raw_slow: int
    run: int
    run_slow: int

    def of(self, latency_ms: int) -> tuple[int, int]:
        return (self.raw, self.run) if latency_ms == 0 else (self.raw_slow, self.run_slow)


FULL, QUICK = Sizes(50_000, 30_000, 400_000, 240_000), Sizes(3_000, 1_500, 10_000, 4_000)
WARM = 0.5
"""The share of a pipeline run written before its clock starts. The JIT compiles Spark's per-row
code (its JSON reader and writer) by rows seen, so at a few thousand messages a second its C2
compilations still take a third of a core 50,000 messages in, and 40 µs a message of them are
left after 175,000 (700,000-message runs, 2026-11-26): the clock starts past them."""


SAMPLER = RssSampler()
"""This process's RSS by run: the raw loops and the sink's writer run here, the pipeline in a child."""


def pipeline_cfg(
    queue: str, url: str, root: str, threads: int, n: int, options: dict | None = None, trigger: str = TRIGGER
) -> dict:
    """The continuous job on the endless ``url``, into JSON-lines files, its in-flight window n/4,
    a micro-batch at most every ``trigger``; ``options`` go into the source's config."""
    if queue == "mns":
        cfg = mns_job_cfg(root, url, QUEUE, threads, "processing_time")
    else:
        source = {"type": "sqs", "name": "src", "sqs.url": sqs_queue_url(url), "sqs.endpoint.url": url}
        source |= {"sqs.waittime.seconds": 1, "receivers": threads, "format": "json"}
        source["on_bad_message"] = "skip"  # as bench/e2e_fake.py: the files sink's one-job write
        cfg = job_config(
            source,
            root,
            name="bench-intake",
            schema=SCHEMA,
            staging=dict(STAGING),
            trigger={"mode": "processing_time", "interval": "500ms", "idle_rounds": 1},
            metrics={"print_batches": False},
        )
    # A window well under the run: the receivers cannot stage it all before the clock starts.
    cfg["staging"]["max_in_flight"] = max(1000, n // 4)
    cfg["trigger"]["interval"] = trigger
    cfg["sources"][0].update(options or {})
    return cfg


def child(spec: dict[str, Any]) -> None:
    """The measured pipeline run, in this (child) process: its ``Sustained`` as one JSON line."""
    root = tempfile.mkdtemp(prefix="mq-bench-intake-")
    try:
        options, trigger = spec.get("options"), spec.get("trigger", TRIGGER)
        cfg = pipeline_cfg(spec["queue"], spec["url"], root, spec["threads"], spec["n"], options, trigger)
        cfg["staging"].update(spec.get("staging", {}))
        snaps = Snapshots()
        sampler = RssSampler()
        sampler.start()
        with sampler.run_window(spec["title"], FILES_BUDGET, echo=lambda s: None) as window:
            warm = int(spec["n"] * WARM)
            run = sustained(spec["n"], cfg, lambda: None, snaps, sampler.latest, warm=warm)
        sampler.stopping.set()
        roles = {role: cpu * 1e6 / run.messages for role, cpu in snaps.by_role().items()}
        memory = {"start": dataclasses.asdict(window.start), "peak": dataclasses.asdict(window.peak)}
        result = {"run": dataclasses.asdict(run), "roles": roles, "memory": memory, "sampler": sampler.cost()}
        print(RESULT + json.dumps(result), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def pipeline(
    queue: str, latency_ms: int, threads: int, n: int, cpus: str | None
) -> tuple[Sustained, dict, dict[str, float]]:
    """A child process's pipeline run on a fresh endpoint handing out ``n`` messages (on ``cpus``
    only, through ``taskset -c``, if given); its figures, the endpoint's last counts, and the
    driver's CPU µs a message by thread role. Its peak RSS (the child's driver, JVM and Python
    workers) is printed and added to :data:`SAMPLER`'s windows."""
    with endpoint(queue, latency_ms, max_messages=n) as ep:
        spec = {"queue": queue, "url": ep.url, "threads": threads, "n": n, "options": SOURCE_OPTIONS}
        where = f" on CPU {cpus}" if cpus else ""
        spec["title"] = f"pipeline ({queue}, {latency_ms} ms, {threads} receivers{where})"
        spec["trigger"] = TRIGGER
        spec["staging"] = STAGING_SET
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
        cmd = ["taskset", "-c", cpus, *cmd] if cpus else cmd
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
        line = next(ln for ln in reversed(out.splitlines()) if ln.startswith(RESULT))
        result = json.loads(line[len(RESULT) :])
        memory = result["memory"]
        window = Window(spec["title"], FILES_BUDGET, Rss(**memory["start"]), Rss(**memory["peak"]))
        SAMPLER.windows.append(window)
        print(f"{window.line()}\n{result['sampler']} (in the child)")
        return Sustained(**result["run"]), ep.stop(), result["roles"]


def report(queue: str, latency_ms: int, threads: int, sizes: Sizes) -> Sustained:
    """One queue at one latency: the raw loop, the pipeline, the lines that compare them."""
    print(
        f"\n== {queue}, {latency_ms} ms added per call, {threads} receivers, trigger {TRIGGER} ==", flush=True
    )
    raw_n, n = sizes.of(latency_ms)
    client = CLIENTS[queue]
    raw, raw_ep, crt, crt_cpu = baselines(queue, latency_ms, threads, raw_n, SAMPLER)
    run, ep_stats, roles = pipeline(queue, latency_ms, threads, n, None)
    driver_us = run.cpu_seconds * 1e6 / run.messages
    print(run.line())
    print(f"ratio pipeline/raw: {run.rate / raw:.2f}x ({client})")
    if crt:
        print(f"ratio pipeline/raw awscrt: {run.rate / crt:.2f}x")
    print(f"driver CPU per message: {driver_us:.0f} us (Python + JVM, session start excluded)")
    if crt_cpu:
        python_us = sum(us for role, us in roles.items() if role.startswith("Python"))
        both = f"{driver_us:.0f} us (Python + JVM) / {crt_cpu:.0f} us a message"
        alone = f"the Python process alone: {python_us:.0f} us, {python_us / crt_cpu:.2f}x"
        print(f"driver CPU / raw awscrt CPU: {driver_us / crt_cpu:.2f}x ({both}; {alone})")
    print(f"cores used: {run.cpu_seconds / run.seconds:.2f}")
    print(f"visibility extensions per message: {run.extended / run.messages:.2f}")
    endpoint_us = ep_stats["cpu_us_per_message"]
    verdict = "ok" if endpoint_us < driver_us / 4 else "NOT under a quarter: the endpoint is in the figures"
    during_raw = raw_ep["cpu_us_per_message"]
    print(
        f"endpoint CPU per message: {endpoint_us:.1f} us (node; {during_raw:.1f} us in the raw loop); "
        f"{endpoint_us / driver_us:.0%} of the driver's, under a quarter: {verdict}"
    )
    print(f"{'driver thread':<45} {'us/msg':>7}")
    for role, us in sorted(roles.items(), key=lambda kv: -kv[1]):
        if us >= 0.5:
            print(f"{role:<45} {us:7.1f}")
    print(phase_table(run), flush=True)
    return run


SINK_CALLS = 8
"""SendMessageBatch calls in flight: the raw loop's threads and the sink's ``maxInFlightRequests``."""


def sink_report(latency_ms: int, n: int) -> None:
    """The SQS sink's partition writer (what each Spark task runs, ``sinks.sqs.sink``) sending ``n``
    rows of ~300 B, against a raw boto3 ``send_message_batch`` loop with as many calls at once."""
    from bench.e2e_fake import body
    from sinks.sqs.config import SqsSinkConfig
    from sinks.sqs.sink import SqsPartitionWriter

    bodies = [body(i)["body"] for i in range(n)]
    print(f"\n== sqs sink, {latency_ms} ms added per call, {SINK_CALLS} calls in flight ==", flush=True)
    title = f"sqs sink's writer and raw send loop ({latency_ms} ms)"
    with endpoint("sqs", latency_ms) as ep, SAMPLER.run_window(title, RAW_BUDGET):
        queue = sqs_queue_url(ep.url)
        raw, raw_cpu = send_rate(ep.url, bodies, SINK_CALLS)
        what = f"boto3, {SINK_CALLS} threads, {n:,} msgs; CPU {raw_cpu:.0f} us/msg"
        print(f"raw send loop: {raw:,.0f} msgs/s ({what})", flush=True)
        for client in ("crt", "boto3"):
            cfg = {"type": "sqs", "name": "out", "sqsUrl": queue, "aws.endpoint": ep.url, "client": client}
            cfg["aws.region"] = os.environ["AWS_REGION"]
            cfg |= {
                "maxInFlightRequests": SINK_CALLS,
                "maxBatchSizeInBytes": 262_144,
                "maxRecordSizeInBytes": 262_144,
            }
            writer = SqsPartitionWriter(SqsSinkConfig.model_validate(cfg))
            writer.write([{"body": b, "source_id": str(i)} for i, b in enumerate(bodies[:100])])  # warm
            rows = [{"body": b, "source_id": str(i)} for i, b in enumerate(bodies)]
            t0, cpu0 = time.perf_counter(), time.process_time()
            sent, rejected = writer.write(rows)
            seconds, cpu = time.perf_counter() - t0, (time.process_time() - cpu0) * 1e6 / n
            assert sent == n and not rejected, (sent, rejected)
            rate = n / seconds
            ratio = f"ratio sink/raw: {rate / raw:.2f}x"
            print(f"sink ({client}): {rate:,.0f} msgs/s, CPU {cpu:.0f} us/msg; {ratio}", flush=True)


def scaling(two_cores: Sustained, sizes: Sizes) -> None:
    """The no-latency SQS pipeline under ``taskset`` on one core, against two."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        print("scaling 1 -> 2 cores: skipped (needs taskset and two CPUs)")
        return
    threads, n = THREADS[("sqs", 0)], sizes.run
    if len(cpus) > 2:  # the main run had more than two cores: run it again on two
        two_cores, _, _ = pipeline("sqs", 0, threads, n, f"{cpus[0]},{cpus[1]}")
    one_core, ep_stats, _ = pipeline("sqs", 0, threads, n, str(cpus[0]))
    used = one_core.cpu_seconds / one_core.seconds
    print(
        f"\nscaling 1 -> 2 cores: {two_cores.rate / one_core.rate:.2f}x (sqs, no latency: "
        f"{one_core.rate:,.0f} msgs/s on CPU {cpus[0]}, cores used {used:.2f}; {two_cores.rate:,.0f} on two; "
        f"the endpoint not pinned, {ep_stats['cpu_us_per_message']:.1f} us/msg)"
    )


def main() -> None:
    global TRIGGER
    cap_arenas()  # as the CLI does, before this process's threads start
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small counts: a smoke run of a few minutes")
    ap.add_argument("--queue", choices=["sqs", "mns"], action="append", help="default both")
    ap.add_argument("--latency-ms", type=int, choices=[0, 20], action="append", help="default both")
    ap.add_argument(
        "--receivers", type=int, help="receivers and raw-loop threads (default: per queue and latency)"
    )
    ap.add_argument("--no-scaling", action="store_true", help="skip the one-core run")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a source option")
    ap.add_argument("--trigger", default=TRIGGER, help="the pipeline's trigger.interval (default 500ms)")
    ap.add_argument("--batch-messages", type=int, help="the pipeline's staging.batch_messages (1: no gate)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    import yaml

    SOURCE_OPTIONS.update({k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.set)})
    TRIGGER = args.trigger
    if args.batch_messages is not None:
        STAGING_SET["batch_messages"] = args.batch_messages
    sizes = QUICK if args.quick else FULL
    SAMPLER.start()
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.2f} on {os.cpu_count()} CPUs (figures are noisy above ~1.5)")
    runs = {}
    for queue in args.queue or ["sqs", "mns"]:
        for latency_ms in args.latency_ms or [0, 20]:
            threads = args.receivers or THREADS[(queue, latency_ms)]
            runs[(queue, latency_ms)] = report(queue, latency_ms, threads, sizes)
    if "sqs" in (args.queue or ["sqs"]):
        for latency_ms in args.latency_ms or [0, 20]:
            sink_report(latency_ms, sizes.raw_slow)
    if ("sqs", 0) in runs and not args.no_scaling:
        scaling(runs[("sqs", 0)], sizes)
    SAMPLER.stopping.set()
    print("\n" + "\n".join(SAMPLER.report()))


if __name__ == "__main__":
    main()
