"""What each user-facing knob does to the sustained rate, latency and memory: one knob at a time.

Runs the continuous fake-queue → files job of ``bench/e2e_fake.py`` once per setting, in one
process (one warm JVM), and prints a row per run: sustained msgs/s, driver CPU per message,
batches, and the peak RSS while it ran. Run: ``python bench/tuning.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench.continuous import sustained
from bench.e2e_fake import job_cfg, seed
from bench.memory import tree_cpu, tree_rss
from sources.fake.store import FakeQueue

KNOBS: list[tuple[str, str, list]] = [
    ("sources.0.receivers", "receivers", [1, 2, 4]),
    ("staging.roll_messages", "roll_messages", [1000, 5000, 20000]),
    ("trigger.interval", "trigger.interval", ["250ms", "500ms", "2s"]),
    ("staging.max_files_per_trigger", "max_files_per_trigger", [5, 20, 1000]),
    ("staging.max_in_flight", "max_in_flight", [25_000, 100_000, 200_000]),
]


def with_setting(cfg: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(cfg)
    node = out
    *path, last = dotted.split(".")
    for part in path:
        node = node[int(part)] if part.isdigit() else node[part]
    node[last] = value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=300_000)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="mq-tuning-")
    try:
        base = job_cfg(f"{root}/warm", 2, 500, "processing_time")
        warm = FakeQueue(f"{root}/warm/q", "in")
        sustained(50_000, base, lambda: seed(warm, 50_000), tree_cpu, tree_rss)  # JVM start, JIT warm-up
        print(f"{'knob':<24} {'value':>8} {'msgs/s':>9} {'CPU ms/msg':>11} {'batches':>8} {'RSS MiB':>8}")
        run = 0
        for dotted, label, values in KNOBS:
            for value in values:
                run += 1
                where = f"{root}/r{run}"
                cfg = with_setting(job_cfg(where, 2, 500, "processing_time"), dotted, value)
                queue = FakeQueue(f"{where}/q", "in")
                r = sustained(args.messages, cfg, lambda q=queue: seed(q, args.messages), tree_cpu, tree_rss)
                print(
                    f"{label:<24} {value!s:>8} {r.rate:9,.0f} {r.cpu_ms_per_message:11.3f} "
                    f"{r.batches:8d} {max(r.rss_first, r.rss_last) / 2**20:8,.0f}",
                    flush=True,
                )
                shutil.rmtree(where, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
