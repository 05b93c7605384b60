"""Benchmark: the SQS pipeline with 1, 2 and 3 intake workers (``mq-ingest intake``) against embedded mode.

On the endless SQS endpoint (``bench/endless_sqs.js``) at one added latency, a fresh instance
per run as in ``bench/intake.py``: its raw boto3 and awscrt loops, the pipeline in embedded mode
(``intake.mode: driver``, ``bench/intake.py``'s child process), then the same job with
``intake.mode: workers`` and 1, 2, 3 ``mq-ingest intake`` processes started beside its driver
(a child process with a fresh JVM, as the embedded run's). Each worker runs the job's receivers
(k workers: k × the receivers); the in-flight window, n/4 in embedded mode, is split among them
so they cannot stage the run before the clock starts (half-way, ``bench.intake.WARM``; a message
counts if it was received after that). Per run: msgs/s and its ratio to the raw awscrt loop and
to embedded mode, CPU a message of every process of the job (the driver's Python and JVM, each
worker), cores used, the driver's own CPU a message against embedded mode's (the issue's goal:
at most a third; msgs/s within 10% of embedded mode on 2 cores), each process's peak RSS against
its budget (the driver's Python + JVM: ``FILES_BUDGET``; a worker: :data:`WORKER_BUDGET`), the
driver's CPU by thread, and the phase table summed over the driver's and the workers' threads.
Run: ``python bench/intake_workers.py [--workers 1,2,3] [--messages N] [--latency-ms 0|20]
[--receivers N] [--trigger 500ms] [--set KEY=VALUE]``; full size: ``make bench-workers`` (400,000
messages a run, four runs, roughly 10 minutes on 2 cores); a smoke run: ``--quick --messages 3000``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

import bench.intake as intake  # first: it sets the AWS and PySpark environment every process inherits
from bench.continuous import Sustained, phase_table, sustained
from bench.cpu_split import Snapshots
from bench.endless import endpoint
from bench.memory import FILES_BUDGET, MIB, RAW_BUDGET, Rss, RssSampler, Window
from bench.raw_loops import baselines
from ingest.runtime.memory import cap_arenas
from tests.support.db_process import free_port

WORKER_BUDGET = RAW_BUDGET
"""An intake worker's peak RSS budget: one Python process with no Spark and no JVM, as a raw client loop."""
STOP_TIMEOUT = 10
"""The workers' ``intake.stop_timeout``: they are stopped after the driver, which acks all it committed."""
MEMORY: list[str] = []
"""Each worker's peak RSS line, printed again at the end."""


@dataclasses.dataclass
class Run:
    """One pipeline run's figures: its ``Sustained`` and CPU µs a message by driver thread and by worker."""

    title: str
    run: Sustained
    roles: dict[str, float]
    workers: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def python(self) -> float:
        """The driver's Python process, µs a message."""
        return sum(us for role, us in self.roles.items() if role.startswith("Python"))

    @property
    def driver(self) -> float:
        """The driver's Python process and its JVM, µs a message."""
        return sum(self.roles.values())


def worker_figures(pid: int, port: int) -> dict[str, float]:
    """A worker's CPU seconds so far (its children's too) and its counters from ``/metrics``:
    ``received``, ``extended`` and ``phase:<name>`` seconds."""
    from prometheus_client.parser import text_string_to_metric_families

    proc = psutil.Process(pid)
    figures: Counter[str] = Counter()
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            figures["cpu"] += times.user + times.system
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in ("mq_ingest_received_total", "mq_ingest_extended_total"):
                figures[s.name[len("mq_ingest_") : -len("_total")]] += s.value
            elif s.name == "mq_ingest_phase_seconds_total":
                figures["phase:" + s.labels["phase"]] += s.value
    return dict(figures)


def child(spec: dict) -> None:
    """The workers-mode driver's run, in this (child) process, its workers already running: one JSON line.

    The clock's two readings (``sustained``'s ``cpu``) take the driver's threads and each
    worker's CPU and counters; the messages counted are those the workers received after the
    first reading, as embedded mode counts its own receivers'.
    """
    n, workers = spec["n"], spec["workers"]
    snaps, seen = Snapshots(), []

    def cpu() -> float:
        figures = {w["id"]: worker_figures(w["pid"], w["port"]) for w in workers}
        seen.append(figures)
        return snaps() + sum(f["cpu"] for f in figures.values())

    sampler = RssSampler()
    sampler.start()
    with sampler.run_window(spec["title"], FILES_BUDGET, echo=lambda s: None) as window:
        run = sustained(n, spec["cfg"], lambda: None, cpu, sampler.latest, warm=int(n * intake.WARM))
    sampler.stopping.set()
    first, last = seen[0], seen[-1]
    delta = {w: Counter(last[w]) - Counter(first[w]) for w in last}
    messages = int(n - sum(f.get("received", 0.0) for f in first.values()))
    if messages <= 0:
        raise SystemExit("every message was received before the clock started: run more messages")
    phases = Counter(run.phases)
    for d in delta.values():
        phases.update({k.removeprefix("phase:"): v for k, v in d.items() if k.startswith("phase:")})
    extended = sum(d["extended"] for d in delta.values())
    run = dataclasses.replace(run, messages=messages, phases=dict(phases), extended=extended)
    roles = {role: cpu * 1e6 / messages for role, cpu in snaps.by_role().items()}
    result = {
        "run": dataclasses.asdict(run),
        "roles": roles,
        "workers": {w: d["cpu"] * 1e6 / messages for w, d in delta.items()},
        "memory": {"start": dataclasses.asdict(window.start), "peak": dataclasses.asdict(window.peak)},
        "sampler": sampler.cost(),
    }
    print(intake.RESULT + json.dumps(result), flush=True)


@contextlib.contextmanager
def intake_workers(config: Path, count: int, root: Path) -> Iterator[tuple[list[dict], dict[str, int]]]:
    """``mq-ingest intake --config config --worker-id wK --port P`` for K in 1..count (logs in
    ``root``) for the block: (id, pid, port) of each, and each one's peak RSS (sampled every 0.25 s).
    Then SIGTERM by PID, a wait (a kill past its stop timeout), and the log's tail of one that failed."""
    procs, listed = {}, []
    for k in range(1, count + 1):
        wid, port = f"w{k}", free_port()
        cmd = [sys.executable, "-m", "ingest.cli", "intake", "--config", str(config), "--worker-id", wid]
        with (root / f"{wid}.log").open("w") as log:
            procs[wid] = subprocess.Popen([*cmd, "--port", str(port)], stdout=log, stderr=log)
        listed.append({"id": wid, "pid": procs[wid].pid, "port": port})
    peaks, stopping = dict.fromkeys(procs, 0), threading.Event()

    def sample() -> None:
        while not stopping.wait(0.25):
            for wid, proc in procs.items():
                with contextlib.suppress(psutil.Error):
                    p = psutil.Process(proc.pid)
                    peaks[wid] = max(peaks[wid], sum(q.memory_info().rss for q in [p, *p.children(True)]))

    threading.Thread(target=sample, name="worker-rss", daemon=True).start()
    try:
        yield listed, peaks
    finally:
        stopping.set()
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for wid, proc in procs.items():
            try:
                code = proc.wait(timeout=STOP_TIMEOUT + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                tail = (root / f"{wid}.log").read_text().splitlines()[-5:]
                print(f"intake worker {wid} exited {code}:\n  " + "\n  ".join(tail), flush=True)


def workers_run(latency_ms: int, threads: int, n: int, count: int) -> tuple[Run, dict]:
    """The job in workers mode with ``count`` workers on a fresh endpoint handing out ``n`` messages:
    its figures and the endpoint's last counts (the workers stopped: their last deletes in)."""
    import yaml

    root = Path(tempfile.mkdtemp(prefix="mq-bench-workers-"))
    title = f"driver of {count} intake worker(s) (sqs, {latency_ms} ms, {threads} receivers each)"
    try:
        with endpoint("sqs", latency_ms, max_messages=n) as ep:
            # The window per worker: n/4 over them all, as embedded mode's.
            cfg = intake.pipeline_cfg(
                "sqs", ep.url, str(root), threads, n, intake.SOURCE_OPTIONS, intake.TRIGGER
            )
            cfg["staging"]["max_in_flight"] = max(100, n // (4 * count))
            cfg["intake"] = {"mode": "workers", "stop_timeout": STOP_TIMEOUT}
            config = root / "job.yaml"
            config.write_text(yaml.safe_dump(cfg))
            with intake_workers(config, count, root) as (listed, peaks):
                spec = {"n": n, "cfg": cfg, "workers": listed, "title": title}
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
                out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
            counts = ep.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    line = next(ln for ln in reversed(out.splitlines()) if ln.startswith(intake.RESULT))
    result = json.loads(line[len(intake.RESULT) :])
    memory = result["memory"]
    window = Window(title, FILES_BUDGET, Rss(**memory["start"]), Rss(**memory["peak"]))
    intake.SAMPLER.windows.append(window)
    print(f"{window.line()}\n{result['sampler']} (in the child)")
    for w, peak in peaks.items():
        share = f"{peak / WORKER_BUDGET:.0%} of its budget {WORKER_BUDGET / MIB:,.0f} MiB"
        over = "MEMORY OVER BUDGET: " if peak > WORKER_BUDGET else "memory, "
        MEMORY.append(f"{over}intake worker {w} of {count}: peak {peak / MIB:,.0f} MiB, {share}")
        print(MEMORY[-1])
    run = Sustained(**result["run"])
    return Run(f"{count} worker(s)", run, result["roles"], result["workers"]), counts


def report(r: Run, crt: float, embedded: Run | None, counts: dict) -> None:
    """One run's lines: rate and ratios, CPU a message by process, cores, the goals, threads, phases."""
    run, total = r.run, r.run.cpu_seconds * 1e6 / r.run.messages
    print(f"{run.line()}\nratio to the raw awscrt loop: {run.rate / crt:.2f}x")
    print(f"{'CPU per message, by process':<34} {'us/msg':>7}")
    rows = [("driver Python", r.python), ("driver JVM", r.driver - r.python)]
    for name, us in [*rows, *((f"intake worker {w}", us) for w, us in r.workers.items()), ("job", total)]:
        print(f"{name:<34} {us:7.1f}")
    driver_cores = r.driver * run.messages / 1e6 / run.seconds
    print(f"cores used: {run.cpu_seconds / run.seconds:.2f} (the whole job; the driver's {driver_cores:.2f})")
    print(f"driver's own CPU per message: {r.python:.0f} us (Python process; {r.driver:.0f} us with its JVM)")
    if embedded is not None:
        rate, own = run.rate / embedded.run.rate, r.python / embedded.python
        met = {True: "ok", False: "NOT met"}
        print(
            f"against embedded mode: {rate:.2f}x its msgs/s (goal at least 0.90x: {met[rate >= 0.9]}); "
            f"driver's own CPU {own:.2f}x (goal at most 0.33x: {met[own <= 1 / 3]})"
        )
    print(f"visibility extensions per message: {run.extended / run.messages:.2f}")
    ep_us = counts["cpu_us_per_message"]
    verdict = "ok" if ep_us < total / 4 else "NOT under a quarter: the endpoint is in the figures"
    print(
        f"endpoint: {counts['received']:,} received, {counts['deleted']:,} deleted; CPU {ep_us:.1f} us/msg, "
        f"{ep_us / total:.0%} of the job's, under a quarter: {verdict}"
    )
    print(f"{'driver thread':<45} {'us/msg':>7}")
    for role, us in sorted(r.roles.items(), key=lambda kv: -kv[1]):
        if us >= 0.5:
            print(f"{role:<45} {us:7.1f}")
    print(phase_table(run) + "\n(phases summed over the driver's and the workers' threads)", flush=True)


def summary(runs: list[Run], crt: float) -> None:
    """The closing table, a line a run: msgs/s, ratios, CPU us a message by process, cores."""
    heads = f"{'/awscrt':>7} {'/embedded':>9} {'driver Py':>9} {'+JVM':>5} {'workers':>7} {'job':>5}"
    print(f"\n{'run':<12} {'msgs/s':>7} {heads}")
    for r in runs:
        ratios = f"{r.run.rate / crt:6.2f}x {r.run.rate / runs[0].run.rate:8.2f}x"
        job = r.run.cpu_seconds * 1e6 / r.run.messages
        cpu = f"{r.python:9.0f} {r.driver:5.0f} {sum(r.workers.values()):7.0f} {job:5.0f}"
        print(
            f"{r.title:<12} {r.run.rate:7,.0f} {ratios} {cpu}  cores {r.run.cpu_seconds / r.run.seconds:.2f}"
        )


def main() -> None:
    cap_arenas()  # as the CLI does, before this process's threads start
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", default="1,2,3", help="worker counts, one run each (default 1,2,3)")
    ap.add_argument("--quick", action="store_true", help="bench/intake.py's small counts")
    ap.add_argument("--messages", type=int, help="a pipeline run's (default 400,000; 240,000 at 20 ms)")
    ap.add_argument("--latency-ms", type=int, choices=[0, 20], default=0, help="added per call (default 0)")
    ap.add_argument("--receivers", type=int, help="receivers (each worker's) and raw-loop threads")
    ap.add_argument("--trigger", default=intake.TRIGGER, help="trigger.interval (default 500ms)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a source option")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    import yaml

    intake.SOURCE_OPTIONS.update({k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.set)})
    intake.TRIGGER, latency = args.trigger, args.latency_ms
    raw_n, n = (intake.QUICK if args.quick else intake.FULL).of(latency)
    n, threads = args.messages or n, args.receivers or intake.THREADS[("sqs", latency)]
    intake.SAMPLER.start()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (noisy above ~1.5)")
    print(
        f"\n== sqs, {latency} ms added per call, {threads} receivers, trigger {args.trigger} ==", flush=True
    )
    _, _, crt, _ = baselines("sqs", latency, threads, raw_n, intake.SAMPLER)
    print("\n== embedded mode (intake.mode: driver) ==", flush=True)
    run, counts, roles = intake.pipeline("sqs", latency, threads, n, None)
    runs = [Run("embedded", run, roles)]
    report(runs[0], crt, None, counts)
    for count in (int(c) for c in args.workers.split(",")):
        print(
            f"\n== workers mode: {count} mq-ingest intake worker(s), {threads} receivers each ==", flush=True
        )
        r, counts = workers_run(latency, threads, n, count)
        report(r, crt, runs[0], counts)
        runs.append(r)
    summary(runs, crt)
    intake.SAMPLER.stopping.set()
    print("\n" + "\n".join([*intake.SAMPLER.report(), "intake workers (peak RSS, each process):", *MEMORY]))


if __name__ == "__main__":
    main()
