"""The job's own directories (checkpoint, state, staging, dead letters, sink outputs) never overlap."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

from ingest.config.types import KeyedError
from ingest.storage.location import hadoop_url, object_url_error

OWN = ("checkpoint", "state.path", "staging.dir", "staging.archive_dir", "dead_letter.path")
"""The keys of the directories the job's Python side writes: a local path or S3 (``ingest.storage``)."""


def normalise(path: str) -> str:
    """A local path or ``file://`` URL as an absolute, normalised path (symlinks resolved); an
    object-store URL (``s3://…``) as written, without trailing slashes, S3's as ``s3a://``."""
    if path.startswith("file:"):
        return os.path.realpath(unquote(urlsplit(path).path) or "/")
    if "://" in path:
        return hadoop_url(path).rstrip("/")
    return os.path.realpath(path)


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def job_dirs(cfg: Any) -> Iterable[tuple[str, str, str | None]]:
    """Each directory the job writes: its config key, its path, and the sink type that may share it
    (a sink whose config declares ``shares_path``)."""
    yield "checkpoint", cfg.checkpoint, None
    yield "state.path", cfg.state.path, None
    yield "staging.dir", cfg.staging.dir, None
    if cfg.staging.archive_dir:
        yield "staging.archive_dir", cfg.staging.archive_dir, None
    if cfg.dead_letter is not None and cfg.dead_letter.path:
        yield "dead_letter.path", cfg.dead_letter.path, None
    for sink in cfg.sinks:
        path = getattr(sink, "path", None)
        if isinstance(path, str) and path:
            yield f"sinks.{sink.name}.path", path, sink.type if sink.shares_path else None


def check_overlaps(cfg: Any) -> None:
    """Refuse two of the job's directories that are the same or one inside the other: each is
    written (and cleaned) by one part of the job, so sharing one corrupts the other's files. Refuse
    a storage the job's own files cannot be on (``gs://`` for the checkpoint, say).

    Raises:
        KeyedError: naming the later key, and the earlier one with both paths.
    """
    seen: list[tuple[str, str, str, str | None]] = []
    for key, path, shared in job_dirs(cfg):
        why = object_url_error(path) if key in OWN else None
        if why is not None:
            raise KeyedError(key, why)
        norm = normalise(path)
        for other_key, other_path, other_norm, other_shared in seen:
            if shared is not None and shared == other_shared:
                continue
            if norm == other_norm:
                how = "is the same directory as"
            elif _within(norm, other_norm):
                how = "is inside"
            elif _within(other_norm, norm):
                how = "contains"
            else:
                continue
            raise KeyedError(
                key,
                f"{path} {how} {other_key} ({other_path}): each part of the job needs a directory of its own",
            )
        seen.append((key, path, norm, shared))
