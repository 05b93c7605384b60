"""A source whose queue calls run in child processes of their own, off the driver's GIL."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ingest.config.registry import build_source
from ingest.connector import AckResult, Received, Source
from ingest.errors import FatalError, IngestError, TransientError

if TYPE_CHECKING:
    from ingest.config.sources import SourceConfig

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
"""Seconds a child process may take to import its source and listen."""
_ERRORS: dict[str, type[Exception]] = {
    "fatal": FatalError,
    "transient": TransientError,
    "ingest": IngestError,
}
"""How a source's error crosses back: its kind, and the class the driver raises it as."""


class ProcessSource(Source):
    """Runs a source's receives, deletes and visibility changes in ``cfg.processes`` child processes.

    The driver process holds the books (in-flight leases, staging, the ack journal) and
    talks to Spark; under one GIL, its receivers' client work (signing, HTTP callbacks,
    parsing replies) queues behind Spark's callbacks and the acker. Here each child process
    runs the registry's ``build_source(cfg)`` with a GIL and an HTTP event loop of its own; the
    driver's threads call it over a Unix socket (``multiprocessing.connection``, an authenticated
    channel per calling thread, pickled calls and replies). ``probe`` and ``lag`` (once at
    start, once in a while) stay in the driver.

    Guarantee: the same as the source's own (every call is the source's own call, only in
    another process). A child that dies (``kill -9``, out of memory) fails the calls under
    way with ``TransientError``: the receivers retry and a new child starts; messages it had
    received and not handed over come back after their visibility timeout and are
    deduplicated, as after any lost receive. A child ends when the driver closes the source
    or when the driver process is gone.

    Example:
        >>> import tempfile
        >>> from sources.fake.config import FakeSourceConfig
        >>> path = tempfile.mkdtemp()
        >>> src = ProcessSource(FakeSourceConfig(type="fake", name="f", path=path, wait_time=0, processes=1))
        >>> src.receive(10, 0)
        []
        >>> src.close()
    """

    can_probe = True
    reports_lag = True

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self.local = build_source(cfg)
        """The source in this process, for ``probe`` and ``lag`` (its clients made lazily, on use)."""
        self.name = self.local.name
        self.queue = self.local.queue
        self.max_batch = self.local.max_batch
        self.visibility_timeout = self.local.visibility_timeout
        self.processes = cfg.processes
        self._children: list[_Child] = []
        self._idle: list[tuple[_Child, Connection]] = []
        self._lock = threading.Lock()
        self._next = 0
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        return {"cfg": self.cfg}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ProcessSource.__init__(self, state["cfg"])

    def receive(self, max_messages: int, wait_seconds: float) -> list[Received]:
        return self._call("receive", max_messages, wait_seconds)

    def ack(self, handles: Sequence[str]) -> AckResult:
        return self._call("ack", list(handles))

    def extend(self, handles: Sequence[str], seconds: float) -> dict[str, str]:
        return self._call("extend", list(handles), seconds)

    def release(self, handles: Sequence[str]) -> None:
        self._call("release", list(handles))

    def probe(self) -> None:
        if self.local.can_probe:
            self.local.probe()

    def lag(self) -> int | None:
        return self.local.lag() if self.local.reports_lag else None

    def close(self) -> None:
        """Close the source in every child and wait for them to end (killed after 10 s)."""
        with self._lock:
            children, self._children, self._idle = self._children, [], []
            self._closed = True
        for child in children:
            child.stop()
        self.local.close()

    def _call(self, method: str, *args: Any) -> Any:
        child, conn = self._channel()
        try:
            conn.send((method, args))
            status, value = conn.recv()
        except (EOFError, OSError) as err:
            with contextlib.suppress(OSError):
                conn.close()
            raise TransientError(f"source {self.name}: {child.ended(err)}") from None
        with self._lock:
            kept = child in self._children
            if kept:
                self._idle.append((child, conn))
        if not kept:  # closed meanwhile, or its child replaced
            conn.close()
        if status == "ok":
            return value
        kind, text = value
        raise _ERRORS.get(kind, RuntimeError)(text if kind in _ERRORS else f"{kind}: {text}")

    def _channel(self) -> tuple[_Child, Connection]:
        """An idle channel, or a new one to the next child (started, or restarted, if need be)."""
        with self._lock:
            if self._closed:  # a call after close must not leave a child nobody stops
                raise TransientError(f"source {self.name}: closed")
            while self._idle:
                child, conn = self._idle.pop()
                if child.alive():
                    return child, conn
                conn.close()
            for dead in [c for c in self._children if not c.alive()]:
                log.warning("source %s: %s", self.name, dead.ended(None))
                self._children.remove(dead)
                dead.stop()  # ended already: reaps it and removes its socket's directory
            while len(self._children) < self.processes:
                self._children.append(_Child(self.cfg))
            child = self._children[self._next % len(self._children)]
            self._next += 1
        return child, child.connect()


class _Child:
    """A child process serving a source on a Unix socket of its own (``-m ingest.intake.processes``)."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.dir = tempfile.mkdtemp(prefix="mq-source-")
        self.address = os.path.join(self.dir, "socket")
        self.authkey = os.urandom(32)
        self.name = cfg.name
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        # No cwd: the project may be imported from a zip (a bundle), which PYTHONPATH can name.
        command = [sys.executable, "-m", "ingest.intake.processes"]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
        assert self.proc.stdin is not None
        with self.proc.stdin as stdin:  # the config (secrets too) over a pipe, never argv
            stdin.write(pickle.dumps((cfg, self.address, self.authkey, os.getpid())))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def connect(self) -> Connection:
        """A new channel; waits for the child to listen, at most ``START_TIMEOUT`` seconds."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not self.alive():
                raise TransientError(f"source {self.name}: {self.ended(None)}")
            try:
                return Client(self.address, family="AF_UNIX", authkey=self.authkey)
            except (FileNotFoundError, ConnectionRefusedError) as err:
                if time.monotonic() > deadline:
                    raise TransientError(f"source {self.name}: its process did not listen: {err}") from None
                time.sleep(0.05)

    def ended(self, err: BaseException | None) -> str:
        """Why a call failed: the child's exit code once it has ended (a channel closes just before)."""
        try:
            code: int | None = self.proc.wait(1 if err is not None else 0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return f"the call to its process failed ({type(err).__name__}: {err})"
        return f"its process (pid {self.proc.pid}) ended with exit code {code}; a new one starts"

    def stop(self, timeout: float = 10.0) -> None:
        with contextlib.suppress(Exception):
            if self.alive():
                conn = Client(self.address, family="AF_UNIX", authkey=self.authkey)
                conn.send(("close", ()))
                conn.recv()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("source %s: its process (pid %d) did not stop; killed", self.name, self.proc.pid)
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _serve() -> None:
    """The child: read the config from stdin, build the source, serve each channel on a thread."""
    from multiprocessing.connection import Listener

    cfg, address, authkey, parent = pickle.loads(sys.stdin.buffer.read())
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    source = build_source(cfg)
    listener = Listener(address, family="AF_UNIX", authkey=authkey)

    def orphaned() -> None:  # the driver is gone (kill -9 too): nothing will call again
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=orphaned, daemon=True, name="parent-watch").start()
    while True:
        try:
            conn = listener.accept()
        except Exception as err:  # a client that failed authentication, or went away at once
            log.warning("source %s: a channel was refused: %s", cfg.name, err)
            continue
        threading.Thread(target=_channel, args=(source, conn), daemon=True, name="channel").start()


def _channel(source: Source, conn: Connection) -> None:
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        if method == "close":
            source.close()
            conn.send(("ok", None))
            os._exit(0)
        try:
            reply: tuple[str, Any] = ("ok", getattr(source, method)(*args))
        except Exception as err:
            reply = ("err", (_kind(err), str(err)))
        conn.send(reply)


def _kind(err: Exception) -> str:
    for kind, cls in _ERRORS.items():
        if isinstance(err, cls):
            return kind
    return type(err).__name__


def make_source(cfg: SourceConfig) -> Source:
    """The source a config describes, as the job runs it: in child processes when ``processes``
    is set (``ProcessSource``), else in this one (the registry's ``build_source``). Its clients
    are made lazily."""
    return ProcessSource(cfg) if cfg.processes else build_source(cfg)


if __name__ == "__main__":
    _serve()
