"""Which staged files a micro-batch read, from Spark's own file-source log in the checkpoint."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import orjson

_COMPACT = ".compact"


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


def _files_of_log_batch(log_dir: Path, log_batch: int) -> list[str] | None:
    single = log_dir / str(log_batch)
    if single.exists():
        return [e["path"] for e in _entries(single)]
    # Every 10th log batch (and, after cleanup, older ones) lives in a compact file that
    # holds every entry up to it: the first compact file at or after this batch has it.
    stems = (p.name[: -len(_COMPACT)] for p in log_dir.glob(f"*{_COMPACT}"))
    compacts = sorted(int(stem) for stem in stems if stem.isdigit())
    for c in compacts:
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


def planned_files(checkpoint: str) -> set[str]:
    """Local paths of every file Spark's file source has planned into a batch of this checkpoint."""
    log_dir = Path(checkpoint) / "sources" / "0"
    if not log_dir.is_dir():
        return set()
    planned: set[str] = set()
    for p in log_dir.iterdir():
        stem = p.name[: -len(_COMPACT)] if p.name.endswith(_COMPACT) else p.name
        if stem.isdigit():
            planned.update(unquote(urlparse(e["path"]).path) for e in _entries(p))
    return planned
