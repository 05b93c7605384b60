"""Helpers for end-to-end tests: build job configs on tmp dirs, run them, read what they wrote."""

from __future__ import annotations

import contextlib
import glob
import io
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import yaml

from tests.support.jobconfig import fake_source
from tests.support.jobconfig import job_config as build
from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]


def body(i: int) -> str:
    return orjson.dumps(
        {
            "event_id": i,
            "user_id": i % 7,
            "action": "click",
            "amount": i / 2,
            "ts": "2026-01-02T03:04:05.678Z",
        }
    ).decode()


def job_config(tmp: Path, **over) -> dict:
    """A drain job from a fake queue at ``tmp/queues`` to a files sink at ``tmp/out``.

    Args:
        tmp: the job's directory.
        **over: top-level keys replacing the defaults' (``source`` updates the source's options).

    Returns:
        The config dict, metrics written to ``tmp/metrics.prom``.
    """
    source = fake_source(tmp, **over.pop("source", {}))
    return build(source, tmp, **({"metrics": {"file": str(tmp / "metrics.prom")}} | over))


def write_config(tmp: Path, cfg: dict) -> Path:
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def read_jsonl_dir(path: Path) -> list[dict]:
    """Every row a files sink (or dead-letter dir) wrote, committed batch dirs only."""
    rows = []
    for f in sorted(glob.glob(str(path / "batch_id=*" / "part-*"))):
        if not os.path.exists(os.path.join(os.path.dirname(f), "_SUCCESS")):
            continue
        with open(f, "rb") as fh:
            rows += [orjson.loads(line) for line in fh if line.strip()]
    for f in sorted(glob.glob(str(path / "batch_id=*.jsonl"))):
        with open(f, "rb") as fh:
            rows += [orjson.loads(line) for line in fh if line.strip()]
    return rows


def metric(prom: list[str], name: str) -> float:
    """A counter's total over its labels, from a metrics file's lines (Prometheus text format)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in prom if line.startswith(name + "{"))


def _cli(config: Path | list[str]) -> list[str]:
    """The command line: ``--config FILE`` for a path, else the arguments given (``--sql …``)."""
    args = list(config) if isinstance(config, list) else ["--config", str(config)]
    return [sys.executable, "-m", "ingest.run", *args]


def run_cli(
    config: Path | list[str], env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``python -m ingest.run`` in its own process group (so a crash hook can kill the JVM too)."""
    return subprocess.run(
        _cli(config),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


@contextlib.contextmanager
def _environ(env: dict | None):
    """``env`` set in ``os.environ`` for the block, the old values put back after it."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_in_session(config: Path, env: dict | None = None) -> tuple[int, str]:
    """Run the job of ``config`` in this process, in the suite's Spark session: what ``run_cli``
    does without a new JVM (~5 s each), for the restarts after a kill.

    ``env`` is set for the run (``${env:...}`` in the config). Returns the exit code and what the
    job printed and logged, to check the same things in as the CLI's output.
    """
    from ingest.config import load_config
    from ingest.pipeline import Job

    lines: list[str] = []
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with _environ(env):
            code = Job(load_config(config), echo=lines.append).run()
    finally:
        root.removeHandler(handler)
    return code, "\n".join(lines) + "\n" + logged.getvalue()


def run_main_in_session(
    config: Path, env: dict | None = None, args: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    """``python -m ingest.run --config config [args]`` in this process, in the suite's Spark session:
    the CLI's own exit code, stdout and stderr (its ``error:`` line) without a new JVM. The signal
    handlers and the root logger's handlers and level ``main`` sets are put back afterwards."""
    from ingest.run import main

    out, err = io.StringIO(), io.StringIO()
    signals = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with _environ(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(config), *args])
    finally:
        for s, handler in signals.items():
            signal.signal(s, handler)
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()


def start_cli(config: Path | list[str], quiet: bool = False, env: dict | None = None) -> subprocess.Popen:
    """Start ``python -m ingest.run`` in its own process group; its output piped as text
    (``quiet``: stdout dropped, stderr kept for the failure message)."""
    return subprocess.Popen(
        _cli(config),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_until(proc: subprocess.Popen, done: Callable[[str], object]) -> str:
    """Read a ``start_cli`` job's output line by line until ``done(all read so far)``; return it.

    Fails if the job's output ends first (it exited)."""
    assert proc.stdout is not None
    out = ""
    for line in proc.stdout:
        out += line
        if done(out):
            return out
    raise AssertionError(
        f"the job ended (rc={proc.wait()}) before its output showed what was awaited:\n{out[-4000:]}"
    )


def rows_in_batch_lines(out: str) -> int:
    """The rows of the ``batch N: rows=R`` lines in a job's output."""
    return sum(int(m) for m in re.findall(r"^batch \d+: rows=(\d+)", out, re.MULTILINE))


def stop_cli(proc: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM the job (a graceful stop) and return its exit code and output."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


def kill_while_running(config: Path, seconds: float, what: str = "") -> None:
    """Start the job and ``kill -9`` its process group (driver and JVM) after ``seconds``.

    Fails if the job had already exited: a kill that hits nothing tests nothing.
    """
    proc = start_cli(config, quiet=True)
    time.sleep(seconds)
    alive = proc.poll() is None
    if alive:
        # The JVM runs in a process group of its own (ingest.runtime.spark.launch_driver_jvm); the job
        # notes its pid beside its checkpoint lock once the session is up.
        record = Path(yaml.safe_load(config.read_text())["checkpoint"]) / "mq_ingest" / "jvm"
        noted = record.read_text().split() if record.exists() else []
        if noted and noted[0] == str(proc.pid):  # this run's JVM, not an earlier run's pid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(noted[2]), signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    assert alive, f"{what}: the job was not running (rc={proc.returncode}): {err}"
    assert proc.returncode == -signal.SIGKILL


def wait_all_visible(queue, timeout: float = 60.0) -> None:
    """Poll until a fake queue has no message in flight (a killed job's leases ran out)."""
    wait_for(lambda: not queue.count()["in_flight"], timeout, "every fake-queue message visible again")


def summary(out: str) -> dict:
    """The figures of the job's last ``SUMMARY {json}`` line."""
    lines = [line for line in out.splitlines() if line.startswith("SUMMARY ")]
    assert lines, f"no SUMMARY line in the job's output:\n{out[-4000:]}"
    return orjson.loads(lines[-1][len("SUMMARY ") :])
