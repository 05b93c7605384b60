"""The staging dir's files: cut to size, written whole (temp name, fsync, rename), discarded, reclaimed."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TMP_DIR = "_tmp"
"""Spark's file source skips names starting with ``_``, so partial files are never read."""

HELD_DIR = "_held"
"""Whole staged files the gate (``ingest.intake.staged_gate``) holds back from Spark's listing: hidden
for the same reason as ``_tmp``, and renamed into the staging dir when published."""


def write_whole(directory: Path, name: str, data: bytes, held: bool = False) -> Path:
    """Write ``data`` as ``directory/name`` (``directory/_held/name`` when ``held``), owner-only,
    appearing only complete and fsynced.

    Written under ``_tmp/`` and renamed in; a write that fails leaves no partial file and
    raises ``OSError``. A failing fsync of the directory (after the rename) is only logged. A held
    file's directory is not fsynced: a crash drops held files anyway (``discard_except``), and
    its publication fsyncs the staging dir (``ingest.intake.staged_gate.Gate.publish``).
    """
    tmp = directory / TMP_DIR / name
    into = directory / HELD_DIR if held else directory
    try:
        tmp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if held:
            into.mkdir(mode=0o700, exist_ok=True)
        # Owner-only: staged lines hold bodies and receipt handles.
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        final = into / name
        os.rename(tmp, final)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    if not held:
        sync_dir(directory)
    return final


def sync_dir(directory: Path) -> None:
    """fsync ``directory``, so renames into it survive a power loss; a failure is only logged."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as err:  # the file is in place; only its durability across power loss is unsure
        log.warning("fsync of staging dir %s failed: %s", directory, err)


def discard_except(directory: Path, keep: Iterable[str]) -> int:
    """Remove the staged files of ``directory`` not in ``keep``, partial files and held files
    (no batch planned them; their messages are still in flight); return how many."""
    removed = 0
    leftovers = [
        p for sub in (TMP_DIR, HELD_DIR) if (directory / sub).is_dir() for p in (directory / sub).iterdir()
    ]
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


def cut(lines: list[bytes], limit: int) -> list[list[bytes]]:
    """``lines`` in order, in pieces of at most ``limit`` bytes with their newlines (a longer line
    is a piece of its own)."""
    pieces: list[list[bytes]] = []
    piece: list[bytes] = []
    size = 0
    for line in lines:
        n = len(line) + 1
        if piece and size + n > limit:
            pieces.append(piece)
            piece, size = [], 0
        piece.append(line)
        size += n
    pieces.append(piece)
    return pieces
