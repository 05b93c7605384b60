"""The benchmarks' memory figures: RSS of the driver's process tree by part, per run, against a budget.

A driver of mq-ingest is three kinds of process: this Python process (the driver: receivers,
stager, acker, the micro-batch callback), the JVM it launches (Spark's driver and, in local
mode, its executors) and the Python workers the JVM forks (``pyspark.daemon`` and its
children: the Delta sink's ``mapInArrow``, Python UDFs). A job fits a driver with N GiB of
memory when the three together stay under N. :class:`RssSampler` samples their RSS from a
thread and keeps each run's peak; any other child (a PostgreSQL server, an emulator, a
producer) is neither counted nor budgeted.

RSS counts a page shared by two processes twice (the forked Python workers share the
daemon's pages until they write them), so the sum errs high, on the safe side of a budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

import psutil

MIB = 2**20
GIB = 2**30
FILES_BUDGET = int(1.5 * GIB)
"""A job into the files sink (and the other sinks written from the JVM: JDBC), the drain, the
floor and the latency run: the JVM's heap and the driver's Python, no Python workers."""
DELTA_BUDGET = 2 * GIB
"""A job into the Delta sink: its ``mapInArrow`` writers run in Python workers."""
RAW_BUDGET = GIB // 2
"""A raw client loop: this Python process alone, no Spark."""


def tree() -> list[psutil.Process]:
    """This process and its children, without a JVM's child caught before its ``exec``.

    Hadoop's local file system runs ``chmod`` and ``readlink`` for checkpoint and output files
    (no native library), a few times a batch. The JVM starts them with ``posix_spawn``, whose
    child shares the JVM's memory until it execs: a sample taken then counted the JVM twice
    (the one-off peaks of ~2.0-2.3 GiB in earlier runs).
    """
    me = psutil.Process()
    found = [me]
    for p in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            parent = p.parent()
            if parent is not None and parent.name() == "java" and _not_execed(p, parent):
                continue
            found.append(p)
    return found


def _not_execed(child: psutil.Process, jvm: psutil.Process) -> bool:
    """A child still running the JVM's binary (its name is that of the thread that forked it,
    e.g. ``stream executio``), or the spawn helper that is about to exec the command."""
    return child.name() == "jspawnhelper" or child.exe() == jvm.exe()


def tree_rss() -> int:
    """RSS of this process and its children (the JVM, Python workers, any server), in bytes."""
    return sum(rss for _, _, rss in tree_rss_by_process())


def tree_rss_by_process() -> list[tuple[int, str, int]]:
    """(pid, name, RSS in bytes) of this process and each child counted by :func:`tree_rss`."""
    out = []
    for p in tree():
        with contextlib.suppress(psutil.Error):
            out.append((p.pid, p.name(), p.memory_info().rss))
    return out


def tree_cpu(leave_out: int | None = None) -> float:
    """CPU seconds (user + system) of this process and its children so far, but the child
    ``leave_out`` (a pid: e.g. a producer that stands in for the queue's servers)."""
    total = 0.0
    for p in tree():
        if p.pid == leave_out:
            continue
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


@dataclasses.dataclass(frozen=True)
class Rss:
    """One sample of the driver's RSS by part, in bytes."""

    driver: int = 0
    """This Python process."""
    jvm: int = 0
    workers: int = 0
    """The Python workers the JVM forked, summed."""

    @property
    def total(self) -> int:
        return self.driver + self.jvm + self.workers

    def __str__(self) -> str:
        parts = f"driver {self.driver / MIB:,.0f} + JVM {self.jvm / MIB:,.0f}"
        return f"{self.total / MIB:,.0f} MiB ({parts} + Python workers {self.workers / MIB:,.0f})"

    def growth(self, before: Rss) -> str:
        """Each part's growth since ``before``, e.g. ``total +5.6%, driver +2.0%, ...``."""
        pairs = [("total", self.total, before.total), ("driver", self.driver, before.driver)]
        pairs += [("JVM", self.jvm, before.jvm), ("Python workers", self.workers, before.workers)]
        return ", ".join(f"{name} {_pct(now, then)}" for name, now, then in pairs)


def _pct(now: int, then: int) -> str:
    return f"{(now - then) / then:+.1%}" if then else ("+0" if not now else "new")


@dataclasses.dataclass
class Window:
    """One run's figures: its RSS at the start and at its peak (the sample with the largest total)."""

    title: str
    budget: int
    start: Rss
    peak: Rss

    def line(self) -> str:
        """``memory, <run>: peak ... ; budget ...`` or, over it, the ``MEMORY OVER BUDGET`` line."""
        share = f"{self.peak.total / self.budget:.0%} of its budget {self.budget / MIB:,.0f} MiB"
        if self.over:
            return f"MEMORY OVER BUDGET: {self.title}: peak {self.peak}, {share}"
        return (
            f"memory, {self.title}: peak {self.peak}, {share}; {self.start.total / MIB:,.0f} MiB at its start"
        )

    @property
    def over(self) -> bool:
        return self.peak.total > self.budget


class RssSampler(threading.Thread):
    """Samples the driver's RSS by part every ``interval`` seconds; each :meth:`run_window` keeps its peak.

    Walking the process table (psutil's children(), ~3 ms of CPU with 80 processes) happens
    every ``rescan`` seconds and at each window's start and end; in between a sample reads the
    known processes' RSS (``/proc/<pid>/statm``, ~30 µs each). Spark keeps its Python workers
    (``spark.python.worker.reuse``), so one is found within ``rescan`` of its start. Its own
    CPU is counted (:meth:`cost`) so the benchmark can print what sampling took from the run.
    """

    def __init__(self, interval: float = 0.25, rescan: float = 2.0) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.interval, self.rescan = interval, rescan
        self.stopping = threading.Event()
        self.samples = 0
        self.cpu = 0.0
        """CPU seconds this thread used."""
        self.windows: list[Window] = []
        self.peak = Rss()
        """The largest total since the sampler started."""
        self._lock = threading.Lock()
        self._open: list[Window] = []
        self._latest = Rss()
        self._parts: dict[str, list[psutil.Process]] = {}
        self._scanned = 0.0

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.sample()

    def sample(self) -> Rss:
        """Take one sample now (also from another thread), fold it into the open windows."""
        cpu0 = time.thread_time()
        now = time.monotonic()
        with self._lock:
            if now - self._scanned >= self.rescan:
                self._parts, self._scanned = _scan(), now
            rss = Rss(*(_rss(self._parts[part]) for part in ("driver", "jvm", "workers")))
            self._latest, self.samples = rss, self.samples + 1
            self.peak = max(self.peak, rss, key=lambda r: r.total)
            for w in self._open:
                w.peak = max(w.peak, rss, key=lambda r: r.total)
            self.cpu += time.thread_time() - cpu0
        return rss

    def latest(self) -> int:
        """The last sample's total in bytes (for ``bench.continuous.sustained``'s ``rss``: free)."""
        return self._latest.total

    @contextlib.contextmanager
    def run_window(self, title: str, budget: int, echo: Callable[[str], None] = print) -> Iterator[Window]:
        """Keep the peak of the run inside the ``with``; on exit add the window to :attr:`windows`
        and, if the run ended normally, ``echo`` its line."""
        self._scanned = 0.0  # a run may start the JVM or workers: look for them now
        start = self.sample()
        window = Window(title, budget, start, start)
        with self._lock:
            self._open.append(window)
        try:
            yield window
        finally:
            self._scanned = 0.0
            self.sample()
            with self._lock:
                self._open.remove(window)
                self.windows.append(window)
        echo(window.line())

    def cost(self) -> str:
        """How often it sampled and the CPU that took, e.g. ``every 0.25 s, 0.31 ms CPU a sample``."""
        each = self.cpu * 1000 / max(1, self.samples)
        share = each / 1000 / self.interval
        return (
            f"RSS sampler: every {self.interval} s (process table every {self.rescan} s), "
            f"{self.samples:,} samples, {each:.2f} ms CPU a sample ({share:.2%} of a core)"
        )

    def report(self) -> list[str]:
        """The closing lines: every run's peak (windows added from a child process's figures too),
        a ``MEMORY OVER BUDGET`` line for each run over its budget, the largest peak, the cost."""
        lines = ["memory by run (peak RSS; driver = this Python process):"]
        lines += [f"  {w.title}: {w.peak}, budget {w.budget / MIB:,.0f} MiB" for w in self.windows]
        lines += [w.line() for w in self.windows if w.over]
        if not any(w.over for w in self.windows):
            lines.append(f"memory: every run within its budget ({len(self.windows)} runs)")
        peak = max((w.peak for w in self.windows), key=lambda r: r.total, default=self.peak)
        return [*lines, f"peak over all runs: {peak}", self.cost()]


def _scan() -> dict[str, list[psutil.Process]]:
    """This process, its JVM(s) and their Python workers (a JVM's descendants but for pre-exec spawns).

    One walk of the process table (psutil's ``children``), then each child's parent id: the
    cost of a rescan is that walk's.
    """
    me = psutil.Process()
    parts: dict[str, list[psutil.Process]] = {"driver": [me], "jvm": [], "workers": []}
    parent: dict[int, int] = {}
    found = []
    for p in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            parent[p.pid] = p.ppid()
            found.append(p)
    jvms = {}
    for p in found:
        with contextlib.suppress(psutil.Error):
            if parent[p.pid] == me.pid and p.name() == "java":
                jvms[p.pid] = p
                parts["jvm"].append(p)
    for p in found:
        ancestor = parent[p.pid]
        while ancestor in parent and ancestor not in jvms:
            ancestor = parent[ancestor]
        with contextlib.suppress(psutil.Error):
            if p.pid not in jvms and ancestor in jvms and not _not_execed(p, jvms[ancestor]):
                parts["workers"].append(p)
    return parts


def _rss(processes: list[psutil.Process]) -> int:
    total = 0
    for p in processes:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total
