"""Holds whole staged files out of Spark's listing until a micro-batch is worth planning."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from ingest.intake.staged_dir import LocalStagedDir, StagedDir


class Gate:
    """Publishes held staged files to Spark all at once: the micro-batch's size follows the load.

    Spark's file source plans, at each trigger, every staged file it lists (up to
    ``maxFilesPerTrigger``), and each micro-batch has a fixed cost (planning, code generation,
    commits). At high rates one trigger interval's worth of messages is a small batch and that
    cost dominates. So the stager writes each file held (into ``_held/``, which Spark does not
    list, or on S3 in memory: ``ingest.intake.staged_dir``), and the gate publishes every held file
    (renamed into the staging dir oldest first, or PUT) when it is ``due``:

    - the held files hold ``batch_messages`` messages (under load: a batch of about that many);
    - or they came in slower than ``batch_messages`` per ``wait`` seconds, counted from the
      arrival of the oldest held message: a batch would not fill by then, so they go at once
      and Spark plans them at its next trigger, as without a gate (low rates keep their latency);
      this includes the oldest having waited ``wait`` seconds, the most a message is held.

    The stager also publishes all it holds when a receive comes back empty and no other receiver
    staged anything meanwhile (``Stager.idle``): the load has paused, and no batch would fill.

    Spark's own admission control (``maxFilesPerTrigger``, ``maxBytesPerTrigger``) can only cap
    a batch; it cannot wait for one to fill.

    The books stay as they are: a held file holds only messages still in flight on their queues
    (nothing acks a message before the batch that read it commits), leased by the lease keeper
    like every in-flight message, and a restart removes held files (``discard_except``): their
    messages come back from the queue, so recovery still replays at most the batch Spark planned.
    """

    def __init__(
        self,
        directory: Path | StagedDir,
        batch_messages: int,
        wait: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.staged = LocalStagedDir(directory) if isinstance(directory, Path) else directory
        """Where the held files are and go."""
        self.dir = self.staged.dir
        self.batch_messages = batch_messages
        self.wait = wait
        self._clock = clock
        self._files: list[tuple[str, int, float]] = []  # name, lines, its oldest line's arrival
        self._lines = 0
        self._lock = threading.Lock()
        self.published = 0
        """Messages published so far."""

    def hold(self, name: str, lines: int, since: float) -> None:
        """Count in the held file ``name``, just written: ``lines`` messages, the oldest
        handed to the stager at ``since`` (on the gate's clock, ``time.monotonic``)."""
        with self._lock:
            self._files.append((name, lines, since))
            self._lines += lines

    def due(self) -> bool:
        """The held files hold ``batch_messages``, or came in too slowly to fill a batch within
        ``wait`` of their oldest message (so also once it has waited ``wait``)."""
        with self._lock:
            if not self._files:
                return False
            age = self._clock() - self._files[0][2]
            return self._lines >= self.batch_messages or self._lines * self.wait < self.batch_messages * age

    def publish(self) -> int:
        """Publish every held file (``StagedDir.publish``: locally renamed in oldest first, then the
        staging dir fsynced once; on S3 PUT one after another); return how many messages were published.

        Raises:
            OSError: a file could not be published; the files published are counted out, the rest
                still held.
        """
        with self._lock:
            published: set[str] = set()
            try:
                self.staged.publish([name for name, _, _ in self._files], published.add)
            finally:
                lines = sum(n for name, n, _ in self._files if name in published)
                if published:
                    self._files = [f for f in self._files if f[0] not in published]
                    self._lines -= lines
                    self.published += lines
            return lines

    @property
    def messages(self) -> int:
        """Messages in held files."""
        return self._lines

    @property
    def files(self) -> int:
        """Held files."""
        return len(self._files)
