"""Which staged files a micro-batch read, from Spark's own file-source log in the checkpoint."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from urllib.parse import unquote, urlparse

import orjson

from checkpoints.journal import committed_batches
from ingest.errors import ConfigError
from ingest.storage import Store, hadoop_url, is_object_url, store_for

_COMPACT = ".compact"
LOG = "sources/0"
"""The file source's log in the checkpoint (this job has one file source)."""
log = logging.getLogger(__name__)


def staged_file(uri: str) -> str | None:
    """A staged file as the log names it (``file:`` URI or ``s3a://``, URL-encoded) as the job names
    it: a local path, or ``s3a://bucket/key``; None for any other scheme.

    >>> staged_file("file:///srv/staging/a%20b.jsonl"), staged_file("s3a://lake/st/a.jsonl")
    ('/srv/staging/a b.jsonl', 's3a://lake/st/a.jsonl')
    """
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    if is_object_url(uri):
        return hadoop_url(f"s3a://{parsed.netloc}{unquote(parsed.path)}")
    return None


def _entries(store: Store, name: str) -> list[dict]:
    """The JSON entries of one log file (first line is the version, ``v1``); a missing one has none."""
    return _parse(store.read(name) or b"")


def _parse(data: bytes) -> list[dict]:
    return [orjson.loads(line) for line in data.splitlines()[1:] if line.strip()]


def _log_offset(store: Store, batch_id: int) -> int | None:
    """The file source's log offset recorded in ``offsets/<batch_id>`` (None if unknown)."""
    data = store.read(f"offsets/{batch_id}")
    if data is None:
        return None
    lines = data.splitlines()
    # v1, the batch metadata, then one line per source; this job has one file source.
    if len(lines) < 3 or not lines[2].strip():
        return None
    offset = orjson.loads(lines[2])
    return int(offset["logOffset"]) if isinstance(offset, dict) and "logOffset" in offset else None


def _committed_log_offset(store: Store, checkpoint: str) -> int | None:
    """The file source's log offset of the last batch Spark committed (None if none or unknown)."""
    commits = committed_batches(checkpoint)
    return _log_offset(store, max(commits)) if commits else None


def _restart_log_offset(store: Store, checkpoint: str) -> int | None:
    """The file source's log offset just before the last committed batch (-1: before the first
    batch); None if unknown."""
    commits = committed_batches(checkpoint)
    if not commits:
        return -1
    last = max(commits)
    return -1 if last == 0 else _log_offset(store, last - 1)


def _compact_batches(names: list[str]) -> list[int]:
    """The log batches that have a compact file (``N.compact``) among the log's file ``names``, in order."""
    stems = (name[: -len(_COMPACT)] for name in names if name.endswith(_COMPACT))
    return sorted(int(stem) for stem in stems if stem.isdigit())


def _files_of_log_batch(store: Store, log_batch: int) -> list[str] | None:
    single = store.read(f"{LOG}/{log_batch}")
    if single is not None:
        return [e["path"] for e in _parse(single)]
    # Every 10th log batch (and, after cleanup, older ones) lives in a compact file that
    # holds every entry up to it: the first compact file at or after this batch has it.
    for c in _compact_batches(store.list(LOG)):
        if c >= log_batch:
            entries = _entries(store, f"{LOG}/{c}{_COMPACT}")
            return [e["path"] for e in entries if e.get("batchId") == log_batch]
    return None


def batch_files(checkpoint: str, batch_id: int) -> list[str] | None:
    """The files Spark planned into ``batch_id`` (local paths, or ``s3a://`` URLs for staging on
    S3), or None where the log cannot say.

    Spark writes ``offsets/N`` and ``sources/0/<logOffset>`` before it runs batch N, and a
    replay after a crash reads exactly those files again, so the answer is stable for the
    batch's whole life. Batch N holds the files of every log batch after batch N-1's offset
    up to its own. Returns None (the caller then asks Spark) when a log file is missing or
    names a file on a storage the job does not read itself.
    """
    store = store_for(checkpoint)
    end = _log_offset(store, batch_id)
    if end is None:
        return None
    start = -1
    if batch_id > 0:
        prev = _log_offset(store, batch_id - 1)
        if prev is None:
            return None
        start = prev
    paths: list[str] = []
    for log_batch in range(start + 1, end + 1):
        files = _files_of_log_batch(store, log_batch)
        if files is None:
            return None
        paths += files
    named = [staged_file(uri) for uri in paths]
    return None if None in named else [p for p in named if p is not None]


def planned_files(checkpoint: str, *, at_restart: bool = False) -> set[str]:
    """Every file (local path or ``s3a://`` URL) Spark's file source has planned into a batch of
    this checkpoint.

    With ``at_restart``, only the files a restart reads: those of batches Spark has not
    committed (it replays them), and those of the last batch it committed. Spark lists that
    batch's files again when the query starts, and its ``cleanSource`` deletes them then; gone
    already, each one costs a warning with a stack trace. Where a log offset is unknown, every
    planned file is returned.
    """
    after = _restart_log_offset(store_for(checkpoint), checkpoint) if at_restart else None
    if after is None:
        return _logged(checkpoint, lambda batch: True)
    return _logged(checkpoint, lambda batch: batch is None or batch > after)


def check_home(checkpoint: str, staging_dir: str, state: str) -> None:
    """Raise ``ConfigError`` if the checkpoint's file-source log names staged files outside
    ``staging_dir``: the checkpoint was written before the job's folder was copied or moved.

    Spark keeps the files' absolute paths and refuses a log whose files lie outside the
    directory it reads ("Wrong basePath"), so the job says what happened and what to do.
    """
    on_s3 = is_object_url(staging_dir)
    shown = hadoop_url(staging_dir).rstrip("/") if on_s3 else os.path.abspath(staging_dir)
    here = {shown} if on_s3 else {shown, os.path.realpath(staging_dir)}
    for path in _logged(checkpoint, lambda batch: True):
        folder = os.path.dirname(path)
        if folder not in here and (is_object_url(folder) or os.path.realpath(folder) not in here):
            raise ConfigError(
                f"config key checkpoint: {checkpoint} was written by this job when it staged in "
                f"{folder}, not in {shown}: its folder was copied or moved. "
                f"Run it where it ran before, or start afresh: remove the checkpoint {checkpoint}, "
                f"the state {state} and the staging dir {staging_dir} together, and move the sinks' "
                "output away (a new run numbers its batches from 0 again); for the demo: make clean"
            )


def committed_files(checkpoint: str) -> set[str]:
    """The files (paths or ``s3a://`` URLs) of every batch Spark has committed: no batch reads them again
    (a restart only lists the last one's), so their space can be freed.

    Empty where the last commit's log offset is unknown; empty, with a warning, where the log
    cannot be read (Spark deletes old log files after compacting them).
    """
    try:
        committed = _committed_log_offset(store_for(checkpoint), checkpoint)
        if committed is None:
            return set()
        return _logged(checkpoint, lambda batch: batch is not None and batch <= committed)
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("file-source log of %s not read: %s: %s", checkpoint, type(err).__name__, err)
        return set()


def _logged(checkpoint: str, keep: Callable[[int | None], bool]) -> set[str]:
    """The files in the file-source log whose log batch (None: unknown) ``keep`` takes, as
    ``staged_file`` names them (a file on another storage is left out)."""
    store = store_for(checkpoint)
    files: set[str] = set()
    for name in store.list(LOG):
        stem = name[: -len(_COMPACT)] if name.endswith(_COMPACT) else name
        if stem.isdigit():
            entries = _entries(store, f"{LOG}/{name}")
            found = (staged_file(e["path"]) for e in entries if keep(e.get("batchId")))
            files.update(f for f in found if f is not None)
    return files


def prune(checkpoint: str) -> int:
    """Drop gone files of committed batches from the file-source log; return how many were dropped.

    Spark keeps every file its file source ever read in that log, rewrites the whole of it
    every ``compactInterval`` (10) batches and reads it at each start, with no retention option
    (SPARK-17604 was closed unmerged): at 4 staged files a second, ~40 MB a day. Here an entry
    only stops Spark from reading a file twice, and a committed batch's staged files are deleted
    by ``cleanSource``, so such entries can go. Kept: the entries of batches Spark has not
    committed (a replay reads them), and of any file still in place (Spark must not take it for
    a new one: each staging folder is listed once). Only the newest compact file is rewritten,
    whole (locally a temporary file, fsynced, renamed; on S3 one PUT), so a crash leaves the old
    or the new one; call it only while no query runs. Does nothing where the log is not ``v1``
    JSON lines or names files on another storage, and only warns if it cannot be read or written
    (the log is then as Spark left it).
    """
    try:
        return _prune(checkpoint)
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("file-source log of %s left as it is: %s: %s", checkpoint, type(err).__name__, err)
        return 0


def _prune(checkpoint: str) -> int:
    store = store_for(checkpoint)
    compacts = _compact_batches(store.list(LOG))
    committed = _committed_log_offset(store, checkpoint) if compacts else None
    if committed is None:
        return 0
    newest = f"{compacts[-1]}{_COMPACT}"
    lines = (store.read(f"{LOG}/{newest}") or b"").splitlines()
    if not lines or lines[0] != b"v1":
        return 0
    kept, dropped = [lines[0]], 0
    present: dict[str, set[str]] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        entry = orjson.loads(line)
        path = staged_file(entry["path"])
        if path is None:
            return 0
        if entry["batchId"] > committed or _present(path, present):
            kept.append(line)
        else:
            dropped += 1
    if dropped:
        store.write(f"{LOG}/{newest}", b"\n".join(kept))
        store.delete([f"{LOG}/.{newest}.crc"])  # a checksum of the old content
    return dropped


def _present(path: str, listed: dict[str, set[str]]) -> bool:
    """Whether the staged file ``path`` is in place; ``listed`` keeps each folder's names, listed once."""
    folder, name = os.path.split(path)
    if folder not in listed:
        listed[folder] = set(store_for(folder).list())
    return name in listed[folder]
