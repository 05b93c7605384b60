"""LocalStack (SQS only) as a plain process from .venv-localstack on 127.0.0.1, stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-localstack"
"""Built by ``make localstack`` (Python 3.13, pinned ``localstack-core``)."""
PYTHON = VENV / "bin" / "python"
START_TIMEOUT = 90.0


def available() -> tuple[bool, str]:
    """(True, "") when ``.venv-localstack`` holds a LocalStack runtime, else (False, why)."""
    if not PYTHON.exists():
        return False, f"LocalStack tests skipped: {VENV} is missing (build it with `make localstack`)"
    if not any((VENV / "lib").glob("python3*/site-packages/localstack/runtime/main.py")):
        return False, f"LocalStack tests skipped: no localstack-core in {VENV} (re-run `make localstack`)"
    return True, ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(port: int, workdir: Path) -> dict[str, str]:
    """LocalStack's settings: SQS alone, on 127.0.0.1:<port>, nothing fetched, state under ``workdir``."""
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "HOME", "LANG", "LC_ALL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | {
        "GATEWAY_SERVER": "hypercorn",
        "SERVICES": "sqs",
        "EAGER_SERVICE_LOADING": "1",
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "LOCALSTACK_HOST": f"127.0.0.1:{port}",
        "SQS_ENDPOINT_STRATEGY": "off",  # queue URLs http://127.0.0.1:<port>/<account>/<name>
        "DNS_ADDRESS": "0",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "DISABLE_EVENTS": "1",
        "SQS_DISABLE_CLOUDWATCH_METRICS": "1",
        "FILESYSTEM_ROOT": str(workdir / "fs"),
        "LOCALSTACK_VOLUME_DIR": str(workdir / "volume"),
        "TMPDIR": str(tmp),
        "PYTHONUNBUFFERED": "1",
    }


def _sqs_state(url: str) -> str | None:
    """The ``sqs`` entry of ``GET /_localstack/health`` (``running`` once loaded), None if no answer."""
    try:
        with urllib.request.urlopen(f"{url}/_localstack/health", timeout=2) as resp:
            return json.load(resp).get("services", {}).get("sqs")
    except (OSError, ValueError):
        return None


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL after 3 s (a long poll can hold its shutdown)."""
    for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        proc.wait(timeout=10)


@contextmanager
def localstack_server(workdir: Path, timeout: float = START_TIMEOUT) -> Iterator[str]:
    """Start LocalStack, wait until SQS is running, yield ``http://127.0.0.1:<port>``, stop it.

    Its output goes to ``workdir/localstack.log``; if it does not become healthy within
    ``timeout`` seconds (or exits), the log is printed and ``RuntimeError`` raised.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "localstack.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(PYTHON), "-m", "localstack.runtime.main"],
            cwd=workdir,
            env=_env(port, workdir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole, by its PID
        )
    try:
        started = time.monotonic()
        while _sqs_state(url) != "running":
            why = None
            if proc.poll() is not None:
                why = f"exited with code {proc.returncode}"
            elif time.monotonic() - started > timeout:
                why = f"SQS not running after {timeout:.0f} s"
            if why:
                text = log_path.read_text(errors="replace")
                print(f"LocalStack ({proc.pid}) failed to start: {why}; {log_path}:\n{text}")
                raise RuntimeError(f"LocalStack failed to start: {why} (log: {log_path})")
            time.sleep(0.2)
        print(f"LocalStack pid {proc.pid} on {url}: SQS running after {time.monotonic() - started:.1f} s")
        yield url
    finally:
        _stop(proc)
