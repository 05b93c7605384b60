"""The checkpoint lock: one running instance of a job per checkpoint."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ingest.errors import ConfigError


class CheckpointLock:
    """An exclusive ``flock`` on ``<checkpoint>/mq_ingest/lock``, holding the owner's pid.

    The kernel drops the lock when the process dies, even by ``kill -9``, so a crashed job
    never blocks its restart; a second live instance is refused with a clear error.
    As a context manager it is held for exactly the ``with`` block, however the block ends.
    """

    def __init__(self, checkpoint: str) -> None:
        self.checkpoint = checkpoint
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`ConfigError` naming the checkpoint and the holder's pid."""
        lock_dir = Path(self.checkpoint) / "mq_ingest"
        lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
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
