"""The endless queue endpoints (``bench/endless_sqs.js``, ``bench/endless_mns.js``) as Node subprocesses."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = {"sqs": HERE / "endless_sqs.js", "mns": HERE / "endless_mns.js"}


def node() -> str | None:
    """The ``node`` binary on PATH, or None."""
    return shutil.which("node")


class Endpoint:
    """A running endpoint: ``url``, ``stats()`` while it runs, ``stop()`` for its last counts."""

    def __init__(self, queue: str, latency_ms: int = 0, max_messages: int = 0) -> None:
        binary = node()
        if binary is None:
            raise RuntimeError("node is not on PATH: the endless endpoints are Node scripts")
        cmd = [
            binary,
            str(SCRIPTS[queue]),
            "--latency-ms",
            str(latency_ms),
            "--max-messages",
            str(max_messages),
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        port = self.proc.stdout.readline().strip()
        if not port.isdigit():
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"{SCRIPTS[queue].name} did not start (printed {port!r})")
        self.url = f"http://127.0.0.1:{port}"
        self.final: dict[str, Any] | None = None

    def stats(self) -> dict[str, Any]:
        """Counts (received, deleted, visibility_changes, calls) and ``cpu_us_per_message`` so far."""
        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> dict[str, Any]:
        """SIGTERM the endpoint by its PID; the counts it printed on the way out."""
        if self.final is None:
            self.proc.send_signal(signal.SIGTERM)
            out, _ = self.proc.communicate(timeout=10)
            self.final = json.loads(out.strip().splitlines()[-1])
        return self.final


@contextlib.contextmanager
def endpoint(queue: str, latency_ms: int = 0, max_messages: int = 0) -> Iterator[Endpoint]:
    """Run ``queue``'s endpoint (``sqs`` or ``mns``) for the block; killed by PID if it does not stop."""
    ep = Endpoint(queue, latency_ms, max_messages)
    try:
        yield ep
    finally:
        try:
            ep.stop()
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            ep.proc.kill()
            ep.proc.wait()
