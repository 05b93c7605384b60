"""Rolls envelope lines into staged JSON-lines files, each appearing whole (renamed in, or one S3 PUT)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ingest.faults import crash_point
from ingest.intake.owners import SEP
from ingest.intake.staged_dir import staged_dir
from ingest.intake.staged_files import TMP_DIR, cut
from ingest.intake.staged_gate import Gate
from ingest.intake.staging_faults import StagingFaults
from ingest.worker import Worker

__all__ = ["TMP_DIR", "Stager"]

log = logging.getLogger(__name__)

_FULL = (errno.ENOSPC, errno.EDQUOT)


class Stager(Worker):
    """Buffers envelope lines from all receivers and writes them as whole files.

    A file appears in the staging directory only complete: fsynced under ``_tmp/``, then renamed
    in; on S3 (an ``s3a://`` ``staging.dir``) one PUT. So Spark never reads a partial file. Files
    roll when the buffer reaches ``roll_messages`` lines or ``roll_bytes`` bytes, or when the oldest
    line has waited ``roll_interval`` seconds (checked by its thread, ``stager``). No file is
    larger than ``roll_bytes`` (a longer line is a file of its own), and a roll that does not
    fit the volume is written in smaller files (``flush``). Under load each file is held out of
    Spark's listing until the ``gate`` publishes it with the others held, ``batch_messages`` of
    them or ``batch_wait`` seconds after the oldest came (``ingest.intake.staged_gate.Gate``).

    Guarantee: a line handed to ``add`` is in a staged file Spark lists once ``flush`` returns,
    unless the process dies first — then its message is still in flight on its queue
    and comes back after the visibility timeout.
    """

    def __init__(
        self,
        directory: str,
        roll_messages: int,
        roll_bytes: int,
        roll_interval: float,
        give_up_after: float = 300.0,
        on_staged: Callable[[int], None] = lambda lines: None,
        on_file: Callable[[str, bytes], None] = lambda path, data: None,
        reclaimable: Callable[[], Iterable[str]] = lambda: (),
        batch_messages: int = 1,
        batch_wait: float = 1.0,
        owner: str | None = None,
    ) -> None:
        super().__init__("stager")
        self.prefix = f"{owner}{SEP}" if owner else ""
        """Staged files are named after the intake worker that stages them (``ingest.intake.owners``)."""
        self.staged = staged_dir(directory)
        """Where the files go: a local directory or an S3 prefix (``ingest.intake.staged_dir``)."""
        self.dir: Path | str = self.staged.dir  # a local Path, or the s3a:// URL of an S3 prefix
        self.on_staged = on_staged
        """Called with the number of lines of each staged file, once it is in place."""
        self.on_file = on_file
        """Called with each staged file's path (on S3 its ``s3a://`` URL) and content; must not raise."""
        self.reclaimable = reclaimable
        """Paths of staged files no batch reads again (their batch committed); must not raise."""
        self.roll_messages = roll_messages
        self.roll_bytes = roll_bytes
        self.roll_interval = roll_interval
        self._lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._lines: list[bytes] = []
        self._bytes = 0
        self._since = 0.0
        self._added = 0.0  # when lines last came (time.monotonic)
        self._seq = 0
        self.files_written = 0
        self.lines_written = 0
        self.faults = StagingFaults(self.dir, give_up_after)
        """Which steps fail, when to try again, when to give up."""
        self._held = False
        self.gate = Gate(self.staged, batch_messages, batch_wait)
        """Holds written files from Spark until a batch is worth planning (1 message: no holding)."""

    def discard_except(self, keep: set[str]) -> int:
        """Remove staged files not in ``keep``, partial files and held ones; return how many.

        Called before the query starts, with the files a restart reads (Spark's planned,
        uncommitted batches, and its last committed one, whose files Spark lists at start and
        ``cleanSource`` then deletes). A file no batch planned, or the gate still held, holds
        only messages still in flight on their queues (nothing acks a message before a batch
        that read it commits), which come back after their visibility timeout: reading it again
        would only stage each message twice, so recovery replays at most the planned batch. A file of an older
        committed batch is done; ``cleanSource`` deletes it when the next batch is planned, and
        a stop can outrun that.
        """
        return self.staged.discard_except(keep)

    def start(self) -> None:
        """Create the staging dir (on S3 its marker object) and start the roll timer."""
        try:
            self.staged.prepare()
        except OSError as err:  # each write tries again, and fails the job only after give_up_after
            log.warning("cannot create staging dir %s: %s", err.filename or self.dir, err.strerror or err)
        super().start()

    def add(self, lines: list[bytes]) -> None:
        """Append lines; roll a file if the buffer is full."""
        if not lines:
            return
        with self._lock:
            self._added = time.monotonic()
            if not self._lines:
                self._since = self._added
            self._lines.extend(lines)
            self._bytes += sum(len(x) + 1 for x in lines)
            full = len(self._lines) >= self.roll_messages or self._bytes >= self.roll_bytes
        if full and self.faults.due(time.monotonic()):
            self._roll(full=True)

    def _roll(self, full: bool = False) -> None:
        """Roll files on their own (the buffer is full, or its oldest line is due) and publish the
        held ones if due: not while held."""
        with self._write_lock:
            if not self._held:
                self._flush(keep_tail=full)
                self._publish(everything=False)

    def _publish(self, everything: bool) -> None:
        """Publish the held files to Spark: all of them, or (unless ``held``) all once due or once a
        publish failed, whatever the gate would wait for: the receivers are paused meanwhile."""
        with self._write_lock:
            if everything or (not self._held and ("publish" in self.faults.steps or self.gate.due())):
                try:
                    published = self.gate.publish()
                except OSError as err:  # the rest stay held; the timer tries again
                    self._failed(err, "publish")
                else:
                    self.faults.worked("publish", f"{published} held message(s) published")

    def idle(self, asked: float = float("inf")) -> None:
        """A receive asked at ``asked`` (``time.monotonic``) came back empty, and no lines came
        since: the load has paused, so what is held goes to Spark now rather than wait for a batch
        that will not fill (not while ``held``). Lines added meanwhile came from other receivers:
        one receiver losing every race for the messages is not a pause."""
        if self.gate.files and self._added < asked:
            with self._write_lock:
                if not self._held:
                    self._publish(everything=True)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Roll and publish no file while the block runs: lines wait in the buffer (the in-flight
        cap bounds them) and roll once it ends. A file being written when it starts is in place first."""
        with self._write_lock:
            self._held = True
        try:
            yield
        finally:
            self._held = False

    @property
    def failing(self) -> bool:
        """A write or a publish failed: receivers pause until retries of both have worked."""
        return self.faults.failing

    @property
    def last_error(self) -> str:
        """The latest failure of a write or a publish, ``path: reason``."""
        return self.faults.last_error

    def flush(self) -> list[str]:
        """Write whatever is buffered as staged files of at most ``roll_bytes`` each (a longer
        line is a file of its own) and publish every held file, so nothing is left held; return
        the written files' paths, in the order of their lines.

        A write that fails (a full disk, permissions, I/O errors) loses nothing. The partial
        file is removed and the lines are written again in two files of half as many lines
        each, down to one line, so a roll too big for the space left still stages what fits
        (Spark reads and cleans it, which frees space). Lines still not written go back to the
        front of the buffer and the timer retries them with backoff; files already in place
        are not written again. After ``give_up_after`` seconds with no file written it fails
        (``error``) and the job stops.
        """
        with self._write_lock:
            paths = self._flush(keep_tail=False)
            self._publish(everything=True)
        return paths

    def _flush(self, keep_tail: bool) -> list[str]:
        """``flush``; with ``keep_tail``, a last piece cut short by ``roll_bytes`` stays buffered."""
        with self._write_lock:
            with self._lock:
                lines, size, since = self._lines, self._bytes, self._since
                self._lines, self._bytes = [], 0
            if not lines:
                return []
            pieces = [lines] if size <= self.roll_bytes else cut(lines, self.roll_bytes)
            if keep_tail and len(pieces) > 1 and len(pieces[-1]) < self.roll_messages:
                # Rolled because full: the rest waits for more lines, not a small file now.
                self._unshift(pieces.pop(), since)
            todo = pieces[::-1]  # a stack: the next piece to write is last
            paths: list[str] = []
            reclaimed = False
            try:
                while todo:
                    piece = todo[-1]
                    data = b"\n".join(piece) + b"\n"
                    try:
                        path = self._write(data, len(piece))
                    except OSError as err:
                        if err.errno in _FULL and not reclaimed:
                            reclaimed = True
                            if self._reclaim():
                                continue
                        if len(piece) == 1:
                            raise
                        half = len(piece) // 2
                        todo[-1:] = [piece[half:], piece[:half]]
                        continue
                    todo.pop()
                    self.gate.hold(os.path.basename(path), len(piece), since)
                    paths.append(path)
                    self.on_file(path, data)
                    self.on_staged(len(piece))
            except BaseException as err:
                self._unshift([line for piece in reversed(todo) for line in piece], since)
                if not isinstance(err, OSError):
                    raise
                if paths:  # progress: the give-up clock and the backoff start again
                    self.faults.progress()
                self._failed(err, "write")
                return paths
            self.faults.worked("write", f"{len(lines)} line(s) staged")
            return paths

    def _reclaim(self) -> int:
        """Empty the staged files of committed batches still here; return the bytes freed.

        ``cleanSource`` deletes a batch's files only when Spark plans the next batch, which
        needs a new file: on a full volume none comes (``empty_files``).
        """
        freed = self.staged.reclaim(self.reclaimable())
        if freed:
            log.info(
                "staging dir %s full: emptied staged files of committed batches (%d bytes)", self.dir, freed
            )
        return freed

    def _unshift(self, lines: list[bytes], since: float) -> None:
        """Put ``lines`` back at the front of the buffer; its oldest line is as old as theirs."""
        if not lines:
            return
        with self._lock:
            self._lines[:0] = lines
            self._bytes += sum(len(x) + 1 for x in lines)
            self._since = since

    def _failed(self, err: OSError, step: str) -> None:
        """``step`` (``write``, ``publish``) failed: retried with backoff; the job stops after
        ``give_up_after``."""
        fatal = self.faults.failed(err, step, self.buffered, self.gate.messages)
        if fatal is not None:
            self.fail(fatal)

    def _write(self, data: bytes, lines: int) -> str:
        self._seq += 1
        name = f"{self.prefix}{time.time_ns():020d}-{self._seq:06d}-{uuid.uuid4().hex[:8]}.jsonl"
        path = self.staged.hold(name, data)  # where Spark reads it once published
        crash_point("after_stage")
        self.files_written += 1
        self.lines_written += lines
        return path

    def work(self) -> None:
        """The roll timer. An exception here is a bug, not the disk (``flush`` keeps ``OSError``):
        the thread ends with it and the job stops, saying why. It publishes held files due (or
        whose publish failed) too, and so retries each failing step."""
        tick = min(self.roll_interval / 2, 0.1)
        while not self.stopping.wait(tick):
            now = time.monotonic()
            with self._lock:
                due = self._lines and now - self._since >= self.roll_interval
            if not self.faults.due(now):
                continue
            if due:
                self._roll()
            else:
                self._publish(everything=False)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the timer (waiting at most ``timeout`` seconds), write what is buffered and
        publish every held file."""
        ended = super().stop(timeout)
        self.flush()
        return ended

    @property
    def buffered(self) -> int:
        """Lines waiting in the buffer for the next roll."""
        return len(self._lines)
