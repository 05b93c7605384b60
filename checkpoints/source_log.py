"""Which staged files a micro-batch read, from Spark's own file-source log in the checkpoint."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

import orjson

from checkpoints.journal import committed_batches
from ingest.errors import ConfigError

_COMPACT = ".compact"
log = logging.getLogger(__name__)


def _entries(path: Path) -> list[dict]:
    """The JSON entries of one log file (first line is the version, ``v1``)."""
    lines = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines[1:] if line.strip()]


def _log_offset(checkpoint: Path, batch_id: int) -> int | None:
    """The file source's log offset recorded in ``offsets/<batch_id>`` (None if unknown)."""
    path = checkpoint / "offsets" / str(batch_id)
    if not path.exists():
        return None
    lines = path.read_bytes().splitlines()
    # v1, the batch metadata, then one line per source; this job has one file source.
    if len(lines) < 3 or not lines[2].strip():
        return None
    offset = orjson.loads(lines[2])
    return int(offset["logOffset"]) if isinstance(offset, dict) and "logOffset" in offset else None


def _committed_log_offset(checkpoint: Path) -> int | None:
    """The file source's log offset of the last batch Spark committed (None if none or unknown)."""
    commits = committed_batches(str(checkpoint))
    return _log_offset(checkpoint, max(commits)) if commits else None


def _restart_log_offset(checkpoint: Path) -> int | None:
    """The file source's log offset just before the last committed batch (-1: before the first
    batch); None if unknown."""
    commits = committed_batches(str(checkpoint))
    if not commits:
        return -1
    last = max(commits)
    return -1 if last == 0 else _log_offset(checkpoint, last - 1)


def _compact_batches(log_dir: Path) -> list[int]:
    """The log batches that have a compact file (``N.compact``), in order."""
    stems = (p.name[: -len(_COMPACT)] for p in log_dir.glob(f"*{_COMPACT}"))
    return sorted(int(stem) for stem in stems if stem.isdigit())


def _files_of_log_batch(log_dir: Path, log_batch: int) -> list[str] | None:
    single = log_dir / str(log_batch)
    if single.exists():
        return [e["path"] for e in _entries(single)]
    # Every 10th log batch (and, after cleanup, older ones) lives in a compact file that
    # holds every entry up to it: the first compact file at or after this batch has it.
    for c in _compact_batches(log_dir):
        if c >= log_batch:
            return [e["path"] for e in _entries(log_dir / f"{c}{_COMPACT}") if e.get("batchId") == log_batch]
    return None


def batch_files(checkpoint: str, batch_id: int) -> list[str] | None:
    """Local paths of the files Spark planned into ``batch_id``, or None where the log cannot say.

    Spark writes ``offsets/N`` and ``sources/0/<logOffset>`` before it runs batch N, and a
    replay after a crash reads exactly those files again, so the answer is stable for the
    batch's whole life. Batch N holds the files of every log batch after batch N-1's offset
    up to its own. Returns None (the caller then asks Spark) when a log file is missing or
    names a file that is not a local path.
    """
    root = Path(checkpoint)
    end = _log_offset(root, batch_id)
    if end is None:
        return None
    start = -1
    if batch_id > 0:
        prev = _log_offset(root, batch_id - 1)
        if prev is None:
            return None
        start = prev
    log_dir = root / "sources" / "0"
    paths: list[str] = []
    for log_batch in range(start + 1, end + 1):
        files = _files_of_log_batch(log_dir, log_batch)
        if files is None:
            return None
        paths += files
    local = []
    for uri in paths:
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file"):
            return None
        local.append(unquote(parsed.path))
    return local


def planned_files(checkpoint: str, *, at_restart: bool = False) -> set[str]:
    """Local paths of every file Spark's file source has planned into a batch of this checkpoint.

    With ``at_restart``, only the files a restart reads: those of batches Spark has not
    committed (it replays them), and those of the last batch it committed. Spark lists that
    batch's files again when the query starts, and its ``cleanSource`` deletes them then; gone
    already, each one costs a warning with a stack trace. Where a log offset is unknown, every
    planned file is returned.
    """
    after = _restart_log_offset(Path(checkpoint)) if at_restart else None
    if after is None:
        return _logged(checkpoint, lambda batch: True)
    return _logged(checkpoint, lambda batch: batch is None or batch > after)


def check_home(checkpoint: str, staging_dir: str, state: str) -> None:
    """Raise ``ConfigError`` if the checkpoint's file-source log names staged files outside
    ``staging_dir``: the checkpoint was written before the job's folder was copied or moved.

    Spark keeps the files' absolute paths and refuses a log whose files lie outside the
    directory it reads ("Wrong basePath"), so the job says what happened and what to do.
    """
    here = {os.path.abspath(staging_dir), os.path.realpath(staging_dir)}
    for path in _logged(checkpoint, lambda batch: True):
        folder = os.path.dirname(path)
        if folder not in here and os.path.realpath(folder) not in here:
            raise ConfigError(
                f"config key checkpoint: {checkpoint} was written by this job when it staged in "
                f"{folder}, not in {os.path.abspath(staging_dir)}: its folder was copied or moved. "
                f"Run it where it ran before, or start afresh: remove the checkpoint {checkpoint}, "
                f"the state {state} and the staging dir {staging_dir} together, and move the sinks' "
                "output away (a new run numbers its batches from 0 again); for the demo: make clean"
            )


def committed_files(checkpoint: str) -> set[str]:
    """Local paths of the files of every batch Spark has committed: no batch reads them again
    (a restart only lists the last one's), so their space can be freed.

    Empty where the last commit's log offset is unknown; empty, with a warning, where the log
    cannot be read (Spark deletes old log files after compacting them).
    """
    try:
        committed = _committed_log_offset(Path(checkpoint))
        if committed is None:
            return set()
        return _logged(checkpoint, lambda batch: batch is not None and batch <= committed)
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("file-source log of %s not read: %s: %s", checkpoint, type(err).__name__, err)
        return set()


def _logged(checkpoint: str, keep: Callable[[int | None], bool]) -> set[str]:
    """Local paths of the files in the file-source log whose log batch (None: unknown) ``keep`` takes."""
    log_dir = Path(checkpoint) / "sources" / "0"
    if not log_dir.is_dir():
        return set()
    files: set[str] = set()
    for p in log_dir.iterdir():
        stem = p.name[: -len(_COMPACT)] if p.name.endswith(_COMPACT) else p.name
        if stem.isdigit():
            files.update(unquote(urlparse(e["path"]).path) for e in _entries(p) if keep(e.get("batchId")))
    return files


def prune(checkpoint: str) -> int:
    """Drop gone files of committed batches from the file-source log; return how many were dropped.

    Spark keeps every file its file source ever read in that log, rewrites the whole of it
    every ``compactInterval`` (10) batches and reads it at each start, with no retention option
    (SPARK-17604 was closed unmerged): at 4 staged files a second, ~40 MB a day. Here an entry
    only stops Spark from reading a file twice, and a committed batch's staged files are deleted
    by ``cleanSource``, so such entries can go. Kept: the entries of batches Spark has not
    committed (a replay reads them), and of any file still in place (Spark must not take it for
    a new one). Only the newest compact file is rewritten, whole (temporary file, fsync,
    rename), so a crash leaves the old or the new one; call it only while no query runs. Does
    nothing where the log is not local ``v1`` JSON lines, and only warns if it cannot be read
    or written (the log is then as Spark left it).
    """
    try:
        return _prune(checkpoint)
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("file-source log of %s left as it is: %s: %s", checkpoint, type(err).__name__, err)
        return 0


def _prune(checkpoint: str) -> int:
    root = Path(checkpoint)
    log_dir = root / "sources" / "0"
    compacts = _compact_batches(log_dir)
    committed = _committed_log_offset(root) if compacts else None
    if committed is None:
        return 0
    newest = log_dir / f"{compacts[-1]}{_COMPACT}"
    lines = newest.read_bytes().splitlines()
    if not lines or lines[0] != b"v1":
        return 0
    kept, dropped = [lines[0]], 0
    for line in lines[1:]:
        if not line.strip():
            continue
        entry = orjson.loads(line)
        uri = urlparse(entry["path"])
        if uri.scheme not in ("", "file"):
            return 0
        if entry["batchId"] > committed or Path(unquote(uri.path)).exists():
            kept.append(line)
        else:
            dropped += 1
    if dropped:
        tmp = log_dir / f".{newest.name}.prune"
        with open(tmp, "wb") as f:
            f.write(b"\n".join(kept))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, newest)
        (log_dir / f".{newest.name}.crc").unlink(missing_ok=True)  # a checksum of the old content
    return dropped
