"""A pytest plugin that prints the heaviest test modules by CPU (with wall) at the end of a run.

Each test's cost is the CPU its worker and every process the worker started spent from the
test's setup to its teardown: the worker itself, its Spark JVM, the CLI jobs (their JVMs too) and
servers it started (``CpuMeter``). Under pytest-xdist each worker sends its totals to the
controller, which prints one table. Wall time is the sum of the module's setup, call and
teardown phases across workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

HEAVIEST = 15
"""How many modules the table lists."""

_KEY = "mq_ingest_module_costs"


HIERARCHIES = (("/sys/fs/cgroup/cpuacct", "cpuacct", "cpuacct.usage"), ("/sys/fs/cgroup", "", "cpu.stat"))
"""Where each cgroup hierarchy is mounted, its name in ``/proc/self/cgroup`` (v2's is empty), and
the file of its CPU usage."""


class CpuMeter:
    """The CPU seconds this process and every process it starts have spent.

    Where a cgroup's CPU accounting can be written (root on Linux: cgroup v1's ``cpuacct``, or v2),
    this process moves into a cgroup of its own, which every descendant inherits: its usage then
    counts a CLI job's JVM that outlived its parent and was reparented to init, which no
    walk of the process tree sees. Elsewhere, the tree (``psutil``): this process, its live
    descendants and the children they reaped.
    """

    def __init__(self) -> None:
        self.group: Path | None = None
        self.usage = ""
        for root, name, usage in HIERARCHIES:
            groups = _groups(root, name)
            remove_empty(groups)  # earlier runs' groups, empty once their processes ended
            group = groups / str(os.getpid())
            for _ in range(3):  # another worker's clean-up may remove it between mkdir and the move
                try:
                    group.mkdir(parents=True, exist_ok=True)
                    (group / "cgroup.procs").write_text(str(os.getpid()))
                except OSError:
                    continue
                self.group, self.usage = group, usage
                return

    @property
    def method(self) -> str:
        return "its cgroup" if self.group else "its process tree"

    def seconds(self) -> float:
        if self.group is None:
            return _tree_cpu()
        text = (self.group / self.usage).read_text()
        if self.usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(text.split("usage_usec ", 1)[1].split()[0]) / 1e6

    def close(self) -> None:
        """Move this process back to the cgroup it came from; its own is removed once empty (here if
        its processes have ended, else by the controller or the next run)."""
        if self.group is None:
            return
        with contextlib.suppress(OSError):
            (self.group.parent.parent / "cgroup.procs").write_text(str(os.getpid()))
        remove_empty(self.group.parent)


def _current(name: str) -> str:
    """This process's cgroup in the hierarchy ``name`` (``cpuacct``; ``""`` for v2), as a path."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if name in names.split(",") or (not name and not names):
                return path
    return "/"


def _groups(root: str, name: str) -> Path:
    """Where the test workers' cgroups go in a hierarchy: under this process's own cgroup, so a
    limit set on the run (a CI runner's) still holds for them."""
    return Path(root) / _current(name).lstrip("/") / "mq-ingest-tests"


def remove_groups() -> None:
    """Remove the workers' cgroups that no process is in any more, and their folder once empty."""
    for root, name, _ in HIERARCHIES:
        groups = _groups(root, name)
        remove_empty(groups)
        with contextlib.suppress(OSError):
            groups.rmdir()


def remove_empty(groups: Path) -> None:
    """Remove the cgroups under ``groups`` that no process is in any more (rmdir refuses the others)."""
    with contextlib.suppress(OSError):
        for group in groups.iterdir():
            if group.is_dir():
                with contextlib.suppress(OSError):
                    group.rmdir()


def _tree_cpu() -> float:
    """CPU seconds of this process, its live descendants, and every child they have reaped."""
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


class CostReport:
    """Adds up wall and CPU per test module; the controller prints the heaviest."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.costs: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # module -> [wall, cpu]
        self.meter: CpuMeter | None = None  # made by the first test: an xdist controller runs none
        self.methods: set[str] = set()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        if self.meter is None:
            self.meter = CpuMeter()
            self.methods.add(self.meter.method)
        wall, cpu = time.monotonic(), self.meter.seconds()
        yield
        cost = self.costs[item.nodeid.split("::", 1)[0]]
        cost[0] += time.monotonic() - wall
        cost[1] += self.meter.seconds() - cpu

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.meter is not None:
            self.meter.close()
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: hand the totals to the controller
            workeroutput[_KEY] = json.dumps({"costs": dict(self.costs), "methods": sorted(self.methods)})

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object) -> None:
        """Add a finished xdist worker's totals to the controller's."""
        sent = json.loads(getattr(node, "workeroutput", {}).get(_KEY) or "{}")
        for module, (wall, cpu) in sent.get("costs", {}).items():
            self.costs[module][0] += wall
            self.costs[module][1] += cpu
        self.methods.update(sent.get("methods", []))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Last, in the controller (or a run without workers): the groups its workers left."""
        if getattr(config, "workeroutput", None) is None:
            remove_groups()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if getattr(self.config, "workeroutput", None) is not None or not self.costs:
            return
        rows = sorted(self.costs.items(), key=lambda kv: kv[1][1], reverse=True)
        total_wall = sum(w for w, _ in self.costs.values())
        total_cpu = sum(c for _, c in self.costs.values())
        tr = terminalreporter
        how = " or ".join(sorted(self.methods))
        tr.section(f"the {HEAVIEST} heaviest test modules by CPU (each worker's, by {how})")
        tr.write_line(f"{'CPU s':>8} {'wall s':>8}  module")
        for module, (wall, cpu) in rows[:HEAVIEST]:
            tr.write_line(f"{cpu:8.1f} {wall:8.1f}  {module}")
        tr.write_line(
            f"{total_cpu:8.1f} {total_wall:8.1f}  all {len(rows)} modules"
            f" (CPU on {os.cpu_count()} cores; wall summed over workers)"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CostReport(config), "mq_ingest_cost_report")
