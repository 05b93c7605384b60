"""Class data sharing for the driver JVM: Spark's classes archived once, so each session starts ~4 s sooner.

A JVM spends most of a Spark session's start loading and verifying classes. Java 13+ can dump
the classes an application loaded into an archive (``-XX:ArchiveClassesAtExit``) and map it at
the next start (``-XX:SharedArchiveFile``), which starts the session and its first query
seconds sooner (figures: ``docs/performance-history.md``, "The class archive").

``python -m ingest.cds`` builds the archive by running a small demo job in a child process
whose JVM dumps at exit (``make demo`` and ``make test`` run it). The archive is promoted to its
final name only after that JVM has exited cleanly: a truncated archive crashes the JVM that
maps it (SIGBUS, measured on OpenJDK 17), so a partial file must never be found there. An
archive made for another Spark, Java or class path is refused by the JVM itself, which then
starts as usual; sessions run under ``spark-submit`` do not use it (their JVM already runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ingest.runtime.cds_archive import QUIET, archive_path, cache_dir, java_options

__all__ = ["archive_path", "build", "cache_dir", "java_options"]

_C1_ONLY = "-XX:TieredStopAtLevel=1"
"""The dumping JVM compiles with C1 only: the archive holds classes, not compiled code (a C2 JVM
maps it all the same), and C2's compilations were a fifth of the build's CPU (81 s against 63;
67 s of wall against 62)."""


def build(force: bool = False, timeout: float = 600) -> Path | None:
    """Build the archive unless it exists; return its path, or None if it could not be built.

    Args:
        force: rebuild even if the archive exists.
        timeout: seconds the child job may take.
    """
    path = archive_path()
    if path is None:
        print("ingest.cds: no java found; nothing built", file=sys.stderr)
        return None
    if path.is_file() and not force:
        print(f"ingest.cds: {path} is there")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    started = time.monotonic()
    try:
        child = subprocess.run(
            [sys.executable, "-m", "ingest.cds", "--dump-to", str(partial)],
            timeout=timeout,
            capture_output=True,
            text=True,
        )
        if child.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
            tail = (child.stderr or child.stdout).strip().splitlines()[-5:]
            print(f"ingest.cds: building {path} failed (exit {child.returncode}):", *tail, sep="\n  ")
            return None
        os.replace(partial, path)
    except subprocess.TimeoutExpired:
        print(f"ingest.cds: building {path} took over {timeout:.0f}s; nothing built", file=sys.stderr)
        return None
    finally:
        partial.unlink(missing_ok=True)
    size = path.stat().st_size / 2**20
    print(f"ingest.cds: built {path} ({size:,.0f} MiB) in {time.monotonic() - started:.0f}s")
    return path


def _dump(to: str) -> int:
    """Run a small job whose JVM dumps its classes to ``to`` at exit; 0 once that JVM exited cleanly."""
    from pyspark import SparkContext

    from ingest.config import parse_config
    from ingest.pipeline import Job

    dump_options = f"-XX:ArchiveClassesAtExit={to} {QUIET} {_C1_ONLY}"
    root = tempfile.mkdtemp(prefix="mq-ingest-cds-")
    try:
        cfg = {
            "name": "cds",
            "sources": [
                {
                    "type": "fake",
                    "name": "demo",
                    "path": f"{root}/q",
                    "queue": "events",
                    "format": "json",
                    "on_bad_message": "dead_letter",
                    "seed": {"messages": 200, "duplicates": 5, "malformed": 2},
                }
            ],
            "schema": "event_id BIGINT, user_id BIGINT, action STRING, amount DOUBLE, ts TIMESTAMP",
            "transform": "SELECT * FROM source WHERE amount >= 0",
            "sinks": [{"type": "files", "name": "out", "path": f"{root}/out", "format": "jsonl"}],
            "dead_letter": {"path": f"{root}/dead"},
            "checkpoint": f"{root}/ckpt",
            "state": {"path": f"{root}/state"},
            "staging": {"dir": f"{root}/staging"},
            "trigger": {"mode": "available_now"},
            "spark": {
                "log_level": "ERROR",
                "class_data_sharing": False,
                "conf": {"spark.driver.extraJavaOptions": dump_options},
            },
            "metrics": {"print_batches": False},
        }
        code = Job(parse_config(cfg), echo=lambda s: None).run()
        if code != 0:
            return code
        gateway = SparkContext._gateway
        SparkContext.getOrCreate().stop()
        jvm = gateway.proc  # type: ignore[union-attr]
        gateway.shutdown()  # type: ignore[union-attr]
        jvm.stdin.close()  # the gateway server exits when its stdin closes; the dump runs then
        return jvm.wait(timeout=300)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ingest.cds", description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if the archive exists")
    ap.add_argument("--dump-to", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dump_to:
        return _dump(args.dump_to)
    return 0 if build(force=args.force) else 1


if __name__ == "__main__":
    sys.exit(main())
