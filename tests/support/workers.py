"""A workers job's processes for the chaos tests: its driver and intake workers, each in a process group
of its own with its output in a log file, killed (``kill -9``) or stopped (SIGTERM) by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from tests.support.jobs import ROOT

DRIVER = "driver"
"""The name ``Fleet`` gives the job's driver (``mq-ingest run``); workers go by their ids."""


class Fleet:
    """The processes of one workers job: ``start`` one, ``kill9`` or ``stop`` it, read its ``log``.

    Each start of a name writes ``<logs>/<name>.<n>.log`` (stdout and stderr), so a restarted
    process keeps its predecessor's log beside its own. ``close`` kills whatever still runs.
    """

    def __init__(self, logs: Path, env: dict[str, str] | None = None) -> None:
        self.logs = logs
        self.env = {**os.environ, **(env or {})}
        self.procs: dict[str, subprocess.Popen] = {}
        self.paths: dict[str, Path] = {}
        self.configs: dict[str, Path] = {}
        self.starts: dict[str, int] = {}
        logs.mkdir(parents=True, exist_ok=True)

    def driver(self, config: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start the job's driver (``python -m ingest.run --config config``)."""
        return self._start(DRIVER, config, [], env)

    def worker(self, worker_id: str, config: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start intake worker ``worker_id`` (``python -m ingest.run --config config --intake``)."""
        return self._start(worker_id, config, ["--intake", "--worker-id", worker_id], env)

    def _start(
        self, name: str, config: Path, args: list[str], env: dict[str, str] | None
    ) -> subprocess.Popen:
        old = self.procs.get(name)
        assert old is None or old.poll() is not None, f"{name} is running already"
        self.starts[name] = self.starts.get(name, 0) + 1
        path = self.logs / f"{name}.{self.starts[name]}.log"
        with open(path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ingest.run", "--config", str(config), *args],
                cwd=ROOT,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name], self.paths[name], self.configs[name] = proc, path, config
        return proc

    def running(self) -> list[str]:
        """The names of the processes still running."""
        return [name for name, proc in self.procs.items() if proc.poll() is None]

    def log(self, name: str) -> str:
        """The output of the latest start of ``name``."""
        return self.paths[name].read_text(errors="replace")

    def kill9(self, *names: str) -> None:
        """``kill -9`` each of ``names`` at once: its process group, and a driver's JVM (in a group of
        its own). Fails if one had exited already: a kill that hits nothing tests nothing."""
        procs = [self.procs[name] for name in names]
        for name, proc in zip(names, procs, strict=True):
            assert proc.poll() is None, f"{name} was not running (rc={proc.returncode}):\n{self.tail(name)}"
        for name, proc in zip(names, procs, strict=True):
            if name == DRIVER:
                self._kill_jvm(proc)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            assert proc.wait(timeout=60) == -signal.SIGKILL

    def _kill_jvm(self, proc: subprocess.Popen) -> None:
        """The driver notes its JVM beside its checkpoint lock once the session is up (its pid first)."""
        checkpoint = yaml.safe_load(self.configs[DRIVER].read_text())["checkpoint"]
        record = Path(checkpoint) / "mq_ingest" / "jvm"
        noted = record.read_text().split() if record.exists() else []
        if noted and noted[0] == str(proc.pid):  # this run's JVM, not an earlier run's pid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(noted[2]), signal.SIGKILL)

    def stop(self, name: str, timeout: float = 120) -> int:
        """SIGTERM ``name`` (a graceful stop) and return its exit code."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        return self.wait(name, timeout)

    def wait(self, name: str, timeout: float = 120) -> int:
        """``name``'s exit code once it has exited; fails (its log's tail shown) after ``timeout``."""
        try:
            return self.procs[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still running after {timeout:.0f}s:\n{self.tail(name)}") from None

    def tail(self, name: str, chars: int = 4000) -> str:
        return f"--- {self.paths[name]} ---\n{self.log(name)[-chars:]}"

    def close(self) -> None:
        """Kill every process still running (a failed test's), the driver's JVM too."""
        alive = self.running()
        if alive:
            self.kill9(*alive)


@contextlib.contextmanager
def fleet(logs: Path, env: dict[str, str] | None = None) -> Iterator[Fleet]:
    """A ``Fleet`` whose processes are all gone after the block, however it ends."""
    procs = Fleet(logs, env)
    try:
        yield procs
    finally:
        procs.close()


def pause(seconds: float, procs: Fleet, names: list[str]) -> None:
    """Let ``seconds`` pass while ``names`` run; fails at once if one of them exits meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in names:
            assert procs.procs[name].poll() is None, f"{name} exited: {procs.tail(name)}"
        time.sleep(0.1)


class JobThread:
    """The job of ``config`` run on a thread of this process, in the suite's Spark session: a drain's
    driver that the test starts workers beside. ``code`` waits for its exit code; ``close`` stops it
    if it still runs (a test that failed first), so no query outlives the test."""

    def __init__(self, config: Path) -> None:
        from ingest.config import load_config
        from ingest.pipeline import Job

        self.lines: list[str] = []
        self.job = Job(load_config(config), echo=self.lines.append)
        self.codes: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.codes.append(self.job.run()), name="job", daemon=True
        )
        self.thread.start()

    def code(self, timeout: float) -> int:
        """The job's exit code; fails if it runs longer than ``timeout`` seconds, or raised."""
        self.thread.join(timeout)
        out = "\n".join(self.lines[-40:])
        assert not self.thread.is_alive(), f"the job still running after {timeout:.0f}s:\n{out}"
        assert self.codes, f"the job raised (its trace is above):\n{out}"
        return self.codes[0]

    def close(self) -> None:
        if self.thread.is_alive():
            self.job.stop()
            self.thread.join(120)
