"""Benchmark: the driver's CPU per message in steady state, split by thread (JVM and Python).

After a warm-up drain, a continuous fake-queue → files run (``bench/e2e_fake.py``'s job); the
CPU time of every thread of the driver's JVM and of this Python process is read from
``/proc`` at the first and the last commit, and the difference is printed per message, the
threads grouped by role. It says which side of the pipeline a change has to make cheaper:
the raw loop costs about 19 µs a message on one core, Spark's floor about 30 µs a row on two.
Run: ``python bench/cpu_split.py [--messages N] [--warm N]`` (``make bench-cpu``), Linux only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import psutil

from bench.continuous import phase_table, sustained
from bench.e2e_fake import job_cfg, pipeline, seed
from bench.memory import tree, tree_rss
from sources.fake.store import FakeQueue

_TICK = os.sysconf("SC_CLK_TCK")
_JVM_ROLES = [
    ("Executor task", "JVM executor tasks"),
    ("Compiler", "JVM JIT compilers"),
    ("GC", "JVM GC"),
    # The serial collector (ingest.runtime.spark.collector_option) collects in the VM thread.
    ("VM Thread", "JVM GC (VM thread: serial collections, safepoints)"),
]


def _threads(pid: int) -> dict[int, tuple[str, float]]:
    """Thread id → (name, CPU seconds) of one process, from ``/proc``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def _role(process: str, name: str, python_names: dict[int, str], tid: int) -> str:
    if process == "java":
        return next((role for key, role in _JVM_ROLES if key in name), "JVM other threads")
    if tid not in python_names:  # a native library's own thread, by the name it gave it
        return f"Python native thread {re.sub(r'[-_ ]?[0-9]+$', '', name) or '?'}"
    name = python_names[tid]
    return "Python " + re.sub(r"-\d+|\d+", "", name).replace("Thread (run)", "micro-batch (Py4J callback)")


class Snapshots:
    """CPU seconds by role, taken each time the run asks for the CPU (first and last commit)."""

    def __init__(self) -> None:
        self.taken: list[dict[tuple[int, int], tuple[str, float]]] = []

    def __call__(self) -> float:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        snap = {}
        for p in tree():
            with contextlib.suppress(OSError, psutil.Error):
                process = p.name()
                for tid, (name, cpu) in _threads(p.pid).items():
                    snap[(p.pid, tid)] = (_role(process, name, names, tid), cpu)
        self.taken.append(snap)
        return sum(cpu for _, cpu in snap.values())

    def by_role(self) -> Counter[str]:
        first, last = self.taken[0], self.taken[-1]
        used: Counter[str] = Counter()
        for key, (role, cpu) in last.items():
            used[role] += cpu - first.get(key, (role, 0.0))[1]
        return used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=500_000, help="continuous run size")
    ap.add_argument("--warm", type=int, default=200_000, help="warm-up drain size")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="mq-bench-cpu-")
    try:
        pipeline(f"{root}/warm", args.warm, 2, 500)
        snaps = Snapshots()
        queue = FakeQueue(f"{root}/cont/q", "in")
        cfg = job_cfg(f"{root}/cont", 2, 500, "processing_time")
        run = sustained(args.messages, cfg, lambda: seed(queue, args.messages), snaps, tree_rss)
        print(run.line())
        print(run.cpu_line())
        used = snaps.by_role()
        print(f"{'thread':<45} {'µs/msg':>7}")
        for role, cpu in sorted(used.items(), key=lambda kv: -kv[1]):
            if cpu * 1e6 / run.messages >= 0.05:
                print(f"{role:<45} {cpu * 1e6 / run.messages:7.1f}")
        print(phase_table(run))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
