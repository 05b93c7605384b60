"""Where the stager keeps staged files: a local directory (held in ``_held/``, renamed in) or an S3 prefix
(held in memory, one PUT each)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from ingest.faults import crash_point
from ingest.intake.staged_files import HELD_DIR, TMP_DIR, discard_except, empty_files, sync_dir, write_whole
from ingest.storage import S3Store, is_object_url

log = logging.getLogger(__name__)

MARKER = "_mq_ingest"
"""An empty object written at the top of an S3 staging prefix at start, so the prefix exists before
the first staged file (Spark's file source fails on a prefix with no object: ``PATH_NOT_FOUND``).
Its ``_`` hides it from Spark's listing."""


class StagedDir(Protocol):
    """The staging dir's storage: whole files written held (out of Spark's listing), published,
    and the ones no batch will read discarded."""

    @property
    def dir(self) -> Path | str:
        """The staging dir: a local ``Path``, or the ``s3a://`` URL of its prefix."""
        ...

    def prepare(self) -> None:
        """Make the staging dir exist; raise ``OSError`` if it cannot (the first publish tries again)."""
        ...

    def hold(self, name: str, data: bytes) -> str:
        """Keep ``data`` as the staged file ``name``, whole but out of Spark's listing; return where
        Spark reads it once published (its path or ``s3a://`` URL). Raise ``OSError`` if it fails."""
        ...

    def publish(self, names: Sequence[str], done: Callable[[str], None]) -> None:
        """Put the held files ``names`` (oldest first) into Spark's listing, calling ``done`` with
        each once it is there.

        Raises:
            OSError: a file could not be published; the ones not passed to ``done`` stay held.
        """
        ...

    def discard_except(self, keep: Iterable[str]) -> int:
        """Remove the staged files not named in ``keep`` (paths or URLs, compared by file name) and
        any partial or held ones; return how many."""
        ...

    def reclaim(self, paths: Iterable[str]) -> int:
        """Free the space of the committed staged files ``paths``; return the bytes freed."""
        ...


def staged_dir(directory: str) -> StagedDir:
    """The storage for ``staging.dir``: ``S3StagedDir`` for an S3 URL, ``LocalStagedDir`` otherwise."""
    return S3StagedDir(directory) if is_object_url(directory) else LocalStagedDir(Path(directory))


class LocalStagedDir:
    """A local directory: a file is written under ``_tmp/``, fsynced and renamed into ``_held/``;
    published, it is renamed into the directory, which is then fsynced once."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def prepare(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.dir / TMP_DIR).mkdir(mode=0o700, exist_ok=True)

    def hold(self, name: str, data: bytes) -> str:
        write_whole(self.dir, name, data, held=True)
        return str(self.dir / name)

    def publish(self, names: Sequence[str], done: Callable[[str], None]) -> None:
        renamed = 0
        try:
            for name in names:
                os.rename(self.dir / HELD_DIR / name, self.dir / name)
                done(name)
                renamed += 1
                if renamed < len(names):
                    crash_point("during_publish")
        finally:
            if renamed:
                sync_dir(self.dir)

    def discard_except(self, keep: Iterable[str]) -> int:
        return discard_except(self.dir, keep)

    def reclaim(self, paths: Iterable[str]) -> int:
        return empty_files(self.dir, paths)


class S3StagedDir:
    """An S3 prefix. S3 has no rename (a copy and a delete), so a held file's bytes wait in memory
    and its publication is its one PUT: an object appears whole, and never before it is published.

    A crash drops held files either way: their messages are still in flight and come back. The
    memory is bounded by the caps on messages in flight (``staging.max_in_flight`` and
    ``max_staged_bytes``): a held line is a message received and not yet acked. A PUT that fails
    leaves its file held under the same name, and the retry PUTs the same bytes there: a PUT that
    failed on the way back but was stored is only overwritten with itself, never staged twice. A
    PUT runs in the thread that publishes (a receiver rolling a full buffer, or the timer), as a
    local write and fsync do; botocore's timeouts bound it.
    """

    def __init__(self, url: str) -> None:
        self.store = S3Store(url)
        self.dir = self.store.url()
        self._held: dict[str, bytes] = {}
        self._marked = False

    def prepare(self) -> None:
        self.store.write(MARKER, b"")
        self._marked = True

    def hold(self, name: str, data: bytes) -> str:
        self._held[name] = data
        return self.store.url(name)

    def publish(self, names: Sequence[str], done: Callable[[str], None]) -> None:
        """PUT the held files one after another, oldest first, as a local publish renames them: a
        listing of Spark's during a publish then sees its older files, never a newer one alone,
        so no message of a FIFO group reaches a batch before an older one staged with it. (PUTs
        in a pool would overlap the round trips, but land in any order; on moto, which answers
        one request at a time, 20 files took 130 ms one by one and 100 ms in a pool of 8.)"""
        if names and not self._marked:  # its PUT failed at start
            self.prepare()
        for n, name in enumerate(names, start=1):
            self._put(name)
            done(name)
            if n < len(names):
                crash_point("during_publish")

    def _put(self, name: str) -> None:
        """PUT the held file ``name``; it is no longer held once stored."""
        self.store.write(name, self._held[name])
        del self._held[name]

    def discard_except(self, keep: Iterable[str]) -> int:
        names = {os.path.basename(p) for p in keep}
        stale = [n for n in self.store.list() if n.endswith(".jsonl") and n not in names]
        self.store.delete(stale)  # one call per 1,000
        self._held.clear()
        return len(stale)

    def reclaim(self, paths: Iterable[str]) -> int:
        """Nothing to free: a bucket does not fill up (and a held file's write cannot fail for space)."""
        return 0
