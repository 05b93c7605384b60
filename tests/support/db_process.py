"""A test database server as a plain process: a free port, its OS user, waiting for it, stopping it by PID."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_owner(user: str) -> dict:
    """Popen arguments that run a command as the OS ``user`` (the server's own) under root (no
    wrapper process, so a signal reaches the server itself); nothing elsewhere."""
    return {"user": user, "group": user, "extra_groups": []} if os.geteuid() == 0 else {}


def wait_ready(proc: subprocess.Popen, port: int, connect: Callable[[], object], log: Path) -> None:
    """Poll until the server on ``port`` takes a login (``connect()`` closes what it opens); fails
    with the end of its ``log`` if it exits, or after 60 s."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            try:
                connect()
                return
            except Exception:
                pass
        time.sleep(0.1)
    raise TimeoutError(f"{proc.args[0]} did not start within 60 s")


def stop(proc: subprocess.Popen, signum: int) -> None:
    """Stop the server by PID with ``signum`` (its clean shutdown), killing it after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signum)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class DbServer:
    """A running server: its temp directory, the port it listens on, its process."""

    root: Path
    port: int
    proc: subprocess.Popen
    host: str = "127.0.0.1"
    shutdown: ClassVar[int] = signal.SIGTERM
    """The signal of the server's clean shutdown."""

    def stop(self) -> None:
        """Stop the server by PID (:attr:`shutdown`), then remove its directory."""
        stop(self.proc, self.shutdown)
        shutil.rmtree(self.root, ignore_errors=True)


Server = TypeVar("Server", bound=DbServer)


def started(server: Server, ready: Callable[[Server], None]) -> Server:
    """``server`` once ``ready(server)`` returns; stopped (its directory removed) if that fails."""
    try:
        ready(server)
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running(start: Callable[[], Server]) -> Iterator[Server]:
    """The server ``start()`` returns, for a ``with`` block; stopped (its directory removed) after it."""
    server = start()
    try:
        yield server
    finally:
        server.stop()
