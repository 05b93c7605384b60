"""Intake workers' names: a worker's id, the staged files it names after itself, its folder under staging."""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Iterable, Mapping, Sequence

from checkpoints.journal import Entries

WORKERS = "_workers"
"""``<staging>/_workers/<id>/``: a worker's lease (``lock.<n>``) and the acks the job hands it
(``acks/<batch>.json``). Spark's file source skips names starting with ``_``."""
TAKING_OVER = "taking_over"
"""A field of the lease the job holds in a gone worker's folder while it takes that worker over (it
deletes its committed messages, then removes the folder): a worker starting under that id waits."""
SEP = "~"
"""Between a worker's id and the rest of a staged file's name: ``<id>~<time>-<seq>-<rand>.jsonl``."""
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def new_worker_id(given: str | None = None) -> str:
    """``given`` if it is a valid id, else ``<host>-<pid>-<4 hex>``: unique per process, so a restarted
    worker never takes up its predecessor's files (the job deletes those once committed).

    Raises:
        ValueError: ``given`` is not 1-80 letters, digits, ``.``, ``_`` or ``-``.
    """
    if given is not None:
        if not _ID.match(given):
            raise ValueError(f"worker id {given!r}: use 1-80 letters, digits, '.', '_' or '-'")
        return given
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:48] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(2)}"


def owner_of(path: str) -> str | None:
    """The id of the worker that staged ``path`` (a path or URL), or None: staged by a job's driver.

    >>> owner_of("s3a://lake/st/w1~0001-000001-ab12cd34.jsonl"), owner_of("/st/0001-000001-ab.jsonl")
    ('w1', None)
    """
    name = path.rstrip("/").rsplit("/", 1)[-1]
    owner, sep, _ = name.partition(SEP)
    return owner if sep and owner else None


def worker_dir(staging: str, worker: str) -> str:
    """``<staging>/_workers/<worker>``: a local path or an ``s3a://`` URL."""
    return f"{staging.rstrip('/')}/{WORKERS}/{worker}"


def by_owner(entries: Entries | Mapping[str, Entries]) -> dict[str | None, list[Sequence[str]]]:
    """A journal's entries by the worker holding them (``""`` in a journal: the driver's, None here).

    A driver's journal is a list; a workers job's a mapping ``{worker id: entries}``.
    """
    if isinstance(entries, Mapping):
        return {(owner or None): list(rows) for owner, rows in entries.items()}
    return {None: list(entries)} if entries else {}


def flat(entries: Entries | Mapping[str, Entries]) -> Iterable[Sequence[str]]:
    """Every entry of a journal, whoever holds it."""
    for rows in by_owner(entries).values():
        yield from rows
