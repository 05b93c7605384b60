"""The continuous-mode run of the fake-queue benchmark: sustained rate, driver CPU, RSS and phases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ingest.config import parse_config
from ingest.pipeline import Job


@dataclass
class Sustained:
    """What one continuous run measured, from the first to the last commit."""

    messages: int
    seconds: float
    cpu_seconds: float
    rss_first: int
    """Peak RSS while the first 10 % of the messages were written (bytes)."""
    rss_last: int
    """Peak RSS while the last 10 % were written."""
    phases: dict[str, float] = field(default_factory=dict)
    batches: int = 0
    extended: float = 0.0
    """Visibility extensions the lease keeper made (the job's ``extended`` metric)."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_ms_per_message(self) -> float:
        """NaN when no message came after the first commit (a run the first batch took whole)."""
        return self.cpu_seconds * 1000 / self.messages if self.messages else float("nan")

    def line(self) -> str:
        """The benchmarks' ``sustained:`` line."""
        counted = f"{self.messages:,} msgs received after the first commit"
        return f"sustained: {self.rate:,.0f} msgs/s (continuous; {counted})"

    def cpu_line(self) -> str:
        """The benchmarks' ``driver CPU per message:`` line."""
        ms = self.cpu_ms_per_message
        return f"driver CPU per message: {ms:.3f} ms (Python + JVM, session start excluded)"


def sustained(
    n: int,
    cfg: dict,
    seed: Callable[[], None],
    cpu: Callable[[], float],
    rss: Callable[[], int],
    warm: int = 0,
) -> Sustained:
    """``seed()`` the source with ``n`` messages, run the job continuously until all are written, stop it.

    The clock, the CPU and the phase totals start at the first commit, so the session
    start and the first (cold) batch are not in the figures. Only messages received after
    that commit count, so the rate is that of the whole pipeline, receiving included, even
    when the receivers ran ahead during the session start (the backlog they staged is
    processed inside the interval but not counted: the figure errs low, by at most the
    in-flight window over ``n``).

    ``warm``: start the clock only once that many messages are written, not at the first
    commit, so that a short run is past the JVM's JIT compiling (steady state).
    """
    seed()
    job = Job(parse_config(cfg), echo=lambda s: None)
    runner = threading.Thread(target=job.run, name="bench-job")
    runner.start()
    try:
        deadline = time.monotonic() + max(300.0, n / 1000)
        while job.metrics.total("written") < max(1, warm):
            _check(runner, deadline)
            time.sleep(0.01)
        t0, c0, w0 = time.perf_counter(), cpu(), job.metrics.total("written")
        r0 = job.metrics.total("received")
        p0 = job.metrics.by_label("phaseSeconds", "phase")
        b0, e0 = job.metrics.total("batches"), job.metrics.total("extended")
        rss_first = rss_last = 0
        polls = 0
        while (written := job.metrics.total("written")) < n:
            _check(runner, deadline)
            # RSS every 0.25 s: walking the process tree costs the run itself CPU and GIL time
            # (2-4% of the GIL at every 50 ms, measured with py-spy).
            first, last = written < w0 + (n - w0) * 0.1, written >= n - (n - w0) * 0.1
            if (first or last) and polls % 5 == 0:
                now = rss()
                rss_first = max(rss_first, now) if first else rss_first
                rss_last = max(rss_last, now) if last else rss_last
            polls += 1
            time.sleep(0.05)
        elapsed, used = time.perf_counter() - t0, cpu() - c0
        rss_last = max(rss_last, rss())
        phases = {k: v - p0.get(k, 0.0) for k, v in job.metrics.by_label("phaseSeconds", "phase").items()}
        batches = int(job.metrics.total("batches") - b0)
        extended = job.metrics.total("extended") - e0
    finally:
        job.stop()
        runner.join()
    return Sustained(int(n - r0), elapsed, used, rss_first, rss_last, phases, batches, extended)


def _check(runner: threading.Thread, deadline: float) -> None:
    if not runner.is_alive():
        raise RuntimeError("the job stopped before every message was written")
    if time.monotonic() > deadline:
        raise TimeoutError("the continuous run did not write every message in time")


ORDER = ["receive", "stage", "read meta", "dedup", "read+decode+sinks", "state commit", "ack"]
BATCH_PHASES = ("read meta", "dedup", "read+decode+sinks", "state commit")
"""The phases inside foreachBatch: one after the other on the query's thread."""


def phase_table(result: Sustained) -> str:
    """The per-phase table: seconds (summed over threads) and share of the wall time."""
    lines = [f"{'phase':<22} {'seconds':>8} {'share of wall':>14}"]
    names = ORDER + sorted(set(result.phases) - set(ORDER))
    for name in names:
        sec = result.phases.get(name, 0.0)
        lines.append(f"{name:<22} {sec:8.2f} {sec / result.seconds:13.0%}")
    in_batch = sum(result.phases.get(k, 0.0) for k in BATCH_PHASES)
    engine = max(0.0, result.seconds - in_batch)
    share = engine / result.seconds
    lines.append(f"{'between batches':<22} {engine:8.2f} {share:13.0%}  (Spark planning, logs, idle)")
    lines.append(f"{'wall':<22} {result.seconds:8.2f} {'100%':>14}  ({result.batches} batches)")
    return "\n".join(lines)
