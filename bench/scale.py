"""Benchmark: one drain job (fake queue → files) on local[2] and on a standalone cluster with 1 and 2 workers.

Each run is a real process: ``python -m ingest.run`` for local[2], ``spark-submit`` with the bundle
for the cluster (master and workers on 127.0.0.1, 1 core and 1g each). Prints per run msgs/s end to
end (process start → exit, JVM and executor start included) and over the time spent in batches,
each as a ratio to the local[2] baseline run in the same process, and the driver's share of the
CPU the job used: the driver (spark-submit's JVM + the Python driver, or Python + its JVM
locally) against driver + master + workers + executors and their Python workers, sampled with psutil.
Run: ``python bench/scale.py [--messages N] [--workers 1,2]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
import psutil
import yaml

from bench.e2e_fake import SCHEMA, STAGING, seed
from sources.fake.store import FakeQueue
from tests.support import jobconfig
from tests.support.cluster import StandaloneCluster, build_bundle, clean_env, stop_session

ROOT = Path(__file__).resolve().parents[1]
_LATENCY = re.compile(r"^batch \d+: rows=(\d+) .*latency=([\d.]+)s", re.M)


def job_config(root: Path, master: str) -> Path:
    """Write the scaling run's job YAML (the fake queue ``root/q`` into files) and return its path."""
    source = {"type": "fake", "name": "src", "path": str(root / "q"), "queue": "in", "receivers": 2}
    source |= {"batch_size": 500, "wait_time": "200ms", "format": "json", "on_bad_message": "skip"}
    spark = {"master": master, "log_level": "ERROR"}
    cfg = jobconfig.job_config(source, root, name="scale", schema=SCHEMA, staging=STAGING, spark=spark)
    path = root / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class CpuSampler(threading.Thread):
    """CPU seconds of process trees by group, sampled every 0.25 s (an exited process keeps its last)."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        super().__init__(daemon=True)
        self.groups = groups
        self.seen: dict[str, dict[int, float]] = {g: {} for g in groups}
        self.stopping = threading.Event()
        self.sample()
        self.baseline = {g: dict(v) for g, v in self.seen.items()}  # daemons started before the run

    def sample(self) -> None:
        for group, roots in self.groups.items():
            for root in roots:
                with contextlib.suppress(psutil.Error):
                    parent = psutil.Process(root)
                    for p in [parent, *parent.children(recursive=True)]:
                        with contextlib.suppress(psutil.Error):
                            t = p.cpu_times()
                            self.seen[group][p.pid] = t.user + t.system

    def run(self) -> None:
        while not self.stopping.wait(0.25):
            self.sample()

    def totals(self) -> dict[str, float]:
        return {
            g: sum(t - self.baseline[g].get(pid, 0.0) for pid, t in v.items()) for g, v in self.seen.items()
        }


def run_once(label: str, root: Path, n: int, cmd: list[str], env: dict, cluster_pids: list[int]) -> dict:
    q = FakeQueue(str(root / "q"), "in")
    seed(q, n)
    log = root / "run.log"
    sampler = CpuSampler({"driver": [], "cluster": cluster_pids})
    machine0 = psutil.cpu_times()
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True
        )
    sampler.groups["driver"] = [proc.pid]
    sampler.start()
    try:
        proc.wait(1800)
    finally:
        sampler.stopping.set()
        sampler.join()
        stop_session(proc)
    wall = time.perf_counter() - t0
    machine1 = psutil.cpu_times()
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{label}: exit {proc.returncode}\n{text[-4000:]}")
    summary = orjson.loads(next(x for x in text.splitlines() if x.startswith("SUMMARY "))[8:])
    if summary["written"] != n or summary["deletedMessages"] != n or q.count()["total"] != 0:
        raise SystemExit(f"{label}: books wrong: {summary}, queue {q.count()}")
    batches = [(int(r), float(s)) for r, s in _LATENCY.findall(text)]
    cpu = sampler.totals()
    return {
        "label": label,
        "wall": wall,
        "rate": n / wall,
        "batch_rate": n / max(1e-9, sum(s for _, s in batches)),
        "batches": len(batches),
        "driver_cpu": cpu["driver"],
        "cluster_cpu": cpu["cluster"],
        "machine_cpu": (machine1.user + machine1.system) - (machine0.user + machine0.system),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--workers", default="1,2", help="cluster sizes to run (comma-separated)")
    ap.add_argument("--bundle-dir", default=str(ROOT / "dist"), help="where the bundle is built/reused")
    args = ap.parse_args()
    n = args.messages
    tmp = Path(tempfile.mkdtemp(prefix="mq-scale-"))
    results = []
    try:
        bundle_dir = Path(args.bundle_dir)
        bundle_dir.mkdir(parents=True, exist_ok=True)
        bundle = build_bundle(bundle_dir, bundle_dir)
        local = tmp / "local"
        local.mkdir()
        cmd = [sys.executable, "-m", "ingest.run", "--config", str(job_config(local, "local[2]"))]
        env = {**clean_env(), "PYTHONPATH": str(ROOT)}
        results.append(run_once("local[2]", local, n, cmd, env, []))
        for workers in [int(w) for w in args.workers.split(",") if w]:
            root = tmp / f"cluster{workers}"
            root.mkdir()
            cluster = StandaloneCluster(root / "cluster", workers=workers).start()
            try:
                cfg = job_config(root, "")
                cmd = cluster_command(cluster, bundle, cfg)
                pids = [p.pid for p in cluster.procs]
                results.append(run_once(f"standalone, {workers} worker(s)", root, n, cmd, clean_env(), pids))
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results, n)


def cluster_command(cluster: StandaloneCluster, bundle, cfg: Path) -> list[str]:
    from ingest.tools.bundle import submit_command

    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.local.dir": str(cluster.root / "driver-local"),
        "spark.executor.memory": "640m",
    }
    return submit_command(bundle.env_archive, bundle.code_zip, str(cfg), cluster.url, conf=conf)


def report(results: list[dict], n: int) -> None:
    base = results[0]
    print(f"{n:,} messages, fake queue → files sink, drain (available_now); {os.cpu_count()} cores")
    header = f"{'run':<26}{'wall s':>8}{'msgs/s':>9}{'ratio':>7}{'batch msgs/s':>14}{'ratio':>7}"
    print(
        header
        + f"{'batches':>9}{'driver CPU s':>14}{'job CPU s':>11}{'driver share':>14}{'machine CPU s':>15}"
    )
    for r in results:
        job_cpu = r["driver_cpu"] + r["cluster_cpu"]
        print(
            f"{r['label']:<26}{r['wall']:>8.1f}{r['rate']:>9,.0f}{r['rate'] / base['rate']:>6.2f}x"
            f"{r['batch_rate']:>14,.0f}{r['batch_rate'] / base['batch_rate']:>6.2f}x{r['batches']:>9}"
            f"{r['driver_cpu']:>14.1f}{job_cpu:>11.1f}{r['driver_cpu'] / max(job_cpu, 1e-9):>13.0%}"
            f"{r['machine_cpu']:>15.1f}"
        )


if __name__ == "__main__":
    main()
