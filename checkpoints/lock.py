"""The checkpoint lock: one running instance of a job per checkpoint."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from checkpoints.journal import own_dir
from checkpoints.lease import Lease, start_time
from ingest.errors import ConfigError
from ingest.storage import Store, is_object_url, store_for

log = logging.getLogger(__name__)
ORPHAN_WAIT = 30.0
"""Seconds a start waits for the last run's driver JVM to end on its own before it kills it."""


class CheckpointLock:
    """An exclusive ``flock`` on ``<checkpoint>/mq_ingest/lock``, holding the owner's pid; on
    object storage (``s3a://``) a ``checkpoints.lease.Lease`` instead.

    The kernel drops the lock when the process dies, even by ``kill -9``, so a crashed job
    never blocks its restart; a second live instance is refused with a clear error. A lease
    is taken over at once after a ``kill -9`` on the same host, after its stale time from
    another; its holder may lose it (paused past the stale time): ``lost`` is then set,
    ``on_lost`` called with the reason, and ``ensure_held`` raises ``FatalError`` (the job
    checks it before each batch's writes). A ``flock`` is never lost.
    The driver JVM runs in a session of its own (``ingest.runtime.spark.launch_driver_jvm``) and ends
    a few seconds after its driver dies, when its stdin closes; until then it may still plan a
    batch into the checkpoint. So ``record_jvm`` notes it, and the next start waits for it to
    end (and kills it after ``ORPHAN_WAIT`` seconds) before it reads the checkpoint.
    As a context manager it is held for exactly the ``with`` block, however the block ends.
    """

    def __init__(self, checkpoint: str, on_lost: Callable[[str], None] | None = None) -> None:
        self.checkpoint = checkpoint
        self.store: Store = store_for(own_dir(checkpoint))
        self._fd: int | None = None
        named = self.store.url().removesuffix("/mq_ingest")
        self._lease = Lease(self.store, on_lost=on_lost, named=named) if is_object_url(checkpoint) else None
        self.lost = self._lease.lost if self._lease is not None else threading.Event()
        """Set once another instance took the lock over (a lease only)."""

    @property
    def held(self) -> bool:
        return self._fd is not None or (self._lease is not None and self._lease.generation is not None)

    def acquire(self) -> None:
        """Take the lock or raise :class:`ConfigError` naming the checkpoint and the holder's pid (or
        the key, when the checkpoint cannot be created)."""
        if self._lease is not None:
            try:
                self._lease.acquire()
            except OSError as err:  # the first write to the checkpoint: say which key cannot be used
                raise ConfigError(
                    f"config key checkpoint: cannot create {err.filename}: {err.strerror}"
                ) from None
            self._end_orphan()
            return
        lock_dir = Path(own_dir(self.checkpoint))
        try:
            lock_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:  # the first write to the checkpoint: say which key cannot be used
            where = os.fsdecode(err.filename) if err.filename else lock_dir
            raise ConfigError(f"config key checkpoint: cannot create {where}: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(
                f"checkpoint {self.checkpoint} is in use by another running instance "
                f"of this job (pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        self._end_orphan()

    def ensure_held(self) -> None:
        """Raise ``FatalError`` if another instance took the lock over (see the class docstring)."""
        if self._lease is not None:
            self._lease.ensure_held()

    def record_jvm(self, pid: int | None) -> None:
        """Note the driver JVM this process launched, if it did (see the class docstring)."""
        started = start_time(pid) if pid is not None else None
        if self.held and started is not None:
            me = f"{os.getpid()} {start_time(os.getpid())} {pid} {started} {socket.gethostname()}"
            self.store.write("jvm", me.encode())

    def _end_orphan(self) -> None:
        """Wait for the JVM of a dead driver on this host that last held the lock to end; kill it
        if it does not. (A driver on another host left its JVM there: that host's kernel ends it.)"""
        try:
            driver, driver_start, jvm, jvm_start, *host = (self.store.read("jvm") or b"").decode().split()
        except (OSError, ValueError):
            return
        if host and host[0] != socket.gethostname():
            return
        if start_time(int(driver)) == driver_start:
            return  # its driver lives on (it ran this job before another): not an orphan
        deadline = time.monotonic() + ORPHAN_WAIT
        while start_time(int(jvm)) == jvm_start:
            if time.monotonic() > deadline:
                log.warning("the last run's driver JVM (pid %s) outlived its driver: killed", jvm)
                os.kill(int(jvm), signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.1)
        self.store.delete(["jvm"])

    def release(self) -> None:
        """Let the lock go (a no-op when not held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lease is not None:
            self._lease.release()

    def __enter__(self) -> CheckpointLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
