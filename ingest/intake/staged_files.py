"""The staging directory's files: written whole (temp name, fsync, atomic rename), discarded, reclaimed."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TMP_DIR = "_tmp"
"""Spark's file source skips names starting with ``_``, so partial files are never read."""


def write_whole(directory: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as ``directory/name``, owner-only, appearing only complete and fsynced.

    Written under ``_tmp/`` and renamed in; a write that fails leaves no partial file and
    raises ``OSError``. A failing fsync of the directory (after the rename) is only logged.
    """
    tmp = directory / TMP_DIR / name
    try:
        tmp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Owner-only: staged lines hold bodies and receipt handles.
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        final = directory / name
        os.rename(tmp, final)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as err:  # the file is in place; only its durability across power loss is unsure
        log.warning("fsync of staging dir %s failed: %s", directory, err)
    return final


def discard_except(directory: Path, keep: Iterable[str]) -> int:
    """Remove the staged files of ``directory`` not in ``keep``, and partial files; return how many."""
    removed = 0
    tmp = directory / TMP_DIR
    leftovers = [*tmp.iterdir()] if tmp.is_dir() else []
    if directory.is_dir():
        # Names are unique (time, sequence, random), so they are compared alone: a path
        # spelled differently (a symlink, a relative dir) is still kept.
        names = {os.path.basename(p) for p in keep}
        leftovers += [p for p in directory.glob("*.jsonl") if p.name not in names]
    for p in leftovers:
        p.unlink(missing_ok=True)
        removed += 1
    return removed


def empty_files(directory: Path, paths: Iterable[str]) -> int:
    """Truncate the staged files of ``directory`` named in ``paths``; return the bytes freed.

    An emptied file stays, so Spark still finds it (when it deletes it, and when a restart
    lists the last committed batch).
    """
    names = {os.path.basename(p) for p in paths}
    freed = 0
    for p in directory.glob("*.jsonl"):
        if p.name in names:
            with contextlib.suppress(OSError):  # deleted by cleanSource meanwhile
                size = p.stat().st_size
                if size:
                    os.truncate(p, 0)
                    freed += size
    return freed
