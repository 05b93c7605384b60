"""The checkpoint lock: one running instance of a job per checkpoint."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import time
from pathlib import Path

from ingest.errors import ConfigError

log = logging.getLogger(__name__)
ORPHAN_WAIT = 30.0
"""Seconds a start waits for the last run's driver JVM to end on its own before it kills it."""


class CheckpointLock:
    """An exclusive ``flock`` on ``<checkpoint>/mq_ingest/lock``, holding the owner's pid.

    The kernel drops the lock when the process dies, even by ``kill -9``, so a crashed job
    never blocks its restart; a second live instance is refused with a clear error.
    The driver JVM runs in a session of its own (``ingest.runtime.spark.launch_driver_jvm``) and ends
    a few seconds after its driver dies, when its stdin closes; until then it may still plan a
    batch into the checkpoint. So ``record_jvm`` notes it, and the next start waits for it to
    end (and kills it after ``ORPHAN_WAIT`` seconds) before it reads the checkpoint.
    As a context manager it is held for exactly the ``with`` block, however the block ends.
    """

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`ConfigError` naming the checkpoint and the holder's pid (or
        the key, when the checkpoint cannot be created)."""
        lock_dir = Path(self.checkpoint) / "mq_ingest"
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
        self._end_orphan(lock_dir / "jvm")

    def record_jvm(self, pid: int | None) -> None:
        """Note the driver JVM this process launched, if it did (see the class docstring)."""
        started = _start_time(pid) if pid is not None else None
        if self._fd is not None and started is not None:
            path = Path(self.checkpoint) / "mq_ingest" / "jvm"
            path.write_text(f"{os.getpid()} {_start_time(os.getpid())} {pid} {started}")

    @staticmethod
    def _end_orphan(path: Path) -> None:
        """Wait for the JVM of a dead driver that last held the lock to end; kill it if it does not."""
        try:
            driver, driver_start, jvm, jvm_start = path.read_text().split()
        except (OSError, ValueError):
            return
        if _start_time(int(driver)) == driver_start:
            return  # its driver lives on (it ran this job before another): not an orphan
        deadline = time.monotonic() + ORPHAN_WAIT
        while _start_time(int(jvm)) == jvm_start:
            if time.monotonic() > deadline:
                log.warning("the last run's driver JVM (pid %s) outlived its driver: killed", jvm)
                os.kill(int(jvm), signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.1)
        path.unlink(missing_ok=True)

    def release(self) -> None:
        """Let the lock go (a no-op when not held)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CheckpointLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``), or None if it is
    gone or cannot be told: with its pid, it names one process, never a later one reusing the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None
